"""The one place that bounds concurrent work. Results come back in input order; cancellation propagates."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ["gather_ordered", "ordered_map", "run_blocking"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


async def ordered_map(items: Iterable[T], fn: Callable[[T], Awaitable[R]], *, limit: int) -> AsyncIterator[R]:
    """Run `fn` over `items` with at most `limit` running, yielding results in input order.

    At most 2 * limit tasks exist at once, so a long input streams in constant memory. An exception from `fn`
    surfaces when its result is due; the remaining tasks are then cancelled and awaited.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    gate = asyncio.Semaphore(limit)

    async def run(item: T) -> R:
        async with gate:
            return await fn(item)

    window: deque[asyncio.Task[R]] = deque()
    try:
        for item in items:
            window.append(asyncio.create_task(run(item)))
            if len(window) >= 2 * limit:
                yield await window.popleft()
        while window:
            yield await window.popleft()
    finally:
        for task in window:
            task.cancel()
        # Wait for the cancelled tasks to unwind; their CancelledErrors are the expected outcome here.
        await asyncio.gather(*window, return_exceptions=True)


async def gather_ordered(items: Iterable[T], fn: Callable[[T], Awaitable[R]], *, limit: int) -> list[R]:
    """`ordered_map` collected into a list."""
    return [result async for result in ordered_map(items, fn, limit=limit)]


def run_blocking(work: Coroutine[Any, Any, R]) -> R:
    """Run a coroutine to completion from synchronous code: `asyncio.run` normally; inside a running event loop
    (Jupyter, an async test), on a worker thread with its own loop, blocking until it is done.

    Every synchronous entry point (the CLI commands, worker processes) goes through here: a Ctrl-C that lands
    before the loop has started the coroutine would otherwise leave it never awaited, and CPython then prints a
    RuntimeWarning after our one-line "interrupted" message."""
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(work)
        log.info("called inside a running event loop: running in a worker thread (await the async form to avoid)")
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="debate-sync") as pool:
            return pool.submit(asyncio.run, work).result()
    finally:
        # A no-op for a coroutine that ran to its end; marks one that never started as closed, without a warning.
        work.close()
