"""The one place that bounds concurrent work. Results come back in input order; cancellation propagates."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

__all__ = ["gather_ordered", "ordered_map"]

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
