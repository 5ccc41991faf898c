"""The one place that bounds concurrent work. Results come back in input order; cancellation propagates."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterable
from types import TracebackType
from typing import Any, TypeVar

from debate.errors import UsageError

__all__ = [
    "EAGER_SLICE_S",
    "Terminated",
    "cancel_on_sigterm",
    "gather_ordered",
    "ordered_map",
    "run_blocking",
    "start_eagerly",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class _Resumed(Coroutine[Any, Any, Any]):
    """A coroutine whose first step already ran (before its task's first step), for the task to drive from there:
    the task's first `send` gets what that step waited on, or ends at once when the step finished the work."""

    __slots__ = ("_coro", "_finished", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self._first: Any = None
        self._finished = False

    def step(self) -> tuple[bool, Any, BaseException | None]:
        """Run the first step: (finished, its result, its exception)."""
        try:
            self._first = self._coro.send(None)
        except StopIteration as stop:
            self._finished = True
            return True, stop.value, None
        except (KeyboardInterrupt, SystemExit):
            self._finished = True
            raise
        except BaseException as exc:  # the work's own outcome, handed to whoever awaits it
            self._finished = True
            return True, None, exc
        return False, None, None

    def send(self, value: Any) -> Any:
        if self._finished:
            # The outcome went to the caller already; this task only ends, quietly.
            raise StopIteration(None)
        first, self._first = self._first, _SENT
        return first if first is not _SENT else self._coro.send(value)

    def throw(self, typ: Any, val: BaseException | object = None, tb: TracebackType | None = None) -> Any:
        if self._finished:
            raise typ if val is None else val  # type: ignore[misc]
        self._first = _SENT
        return self._coro.throw(typ if val is None else val)  # type: ignore[arg-type]

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a resumed coroutine is driven by its task only")


_SENT = object()

EAGER_SLICE_S = 0.01
"""The longest `ordered_map` runs work that never waits before it lets the event loop take a turn."""


def start_eagerly(coro: Coroutine[Any, Any, R]) -> asyncio.Future[R]:
    """`coro` run at once up to its first wait, as Python 3.12's eager tasks run it: work that never waits (a claim
    the cheap checks decide) is finished on return (a done future), with no trip around a busy event loop (each
    trip waits for every other ready callback). Work that waits goes on as a task; during its first step
    `asyncio.current_task()` is that task (on 3.11 through asyncio's own bookkeeping, `_enter_task`), so timeouts
    and cancel scopes entered there (aiohttp's, anyio's, `asyncio.timeout`) belong to it, not to the caller."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, context=context, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    resumed = _Resumed(coro)
    task: asyncio.Task[R] = loop.create_task(resumed, context=context)
    caller = asyncio.current_task(loop)
    if caller is not None:
        asyncio.tasks._leave_task(loop, caller)
    asyncio.tasks._enter_task(loop, task)
    try:
        finished, result, error = context.run(resumed.step)
    finally:
        asyncio.tasks._leave_task(loop, task)
        if caller is not None:
            asyncio.tasks._enter_task(loop, caller)
    if not finished:
        return task
    done: asyncio.Future[R] = loop.create_future()
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)
    return done


async def ordered_map(items: Iterable[T], fn: Callable[[T], Awaitable[R]], *, limit: int) -> AsyncIterator[R]:
    """Run `fn` over `items` with at most `limit` running, yielding results in input order.

    At most 2 * limit tasks exist at once, so a long input streams in constant memory. An exception from `fn`
    surfaces when its result is due; the remaining tasks are then cancelled and awaited. Each item starts eagerly
    (`start_eagerly`): one that never waits is done before the next starts, and the event loop gets a turn every
    `EAGER_SLICE_S` of such work.
    """
    if limit < 1:
        raise UsageError(f"limit must be at least 1, got {limit}")
    gate = asyncio.Semaphore(limit)

    async def run(item: T) -> R:
        async with gate:
            return await fn(item)

    window: deque[asyncio.Future[R]] = deque()
    turned = time.monotonic()
    try:
        for item in items:
            window.append(start_eagerly(run(item)))
            if window[-1].done() and time.monotonic() - turned >= EAGER_SLICE_S:
                # A long run of work that never waits would otherwise hold the loop to its end: other requests,
                # signal handlers and a Ctrl-C's cancellation get their turn at least this often.
                await asyncio.sleep(0)
                turned = time.monotonic()
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


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while `run_blocking` ran with `cancel_on_sigterm`: the work was cancelled as a Ctrl-C
    cancels it, so everything unwound in order (the embedded model stopped, finished records kept)."""


_SIGTERM_CANCELS = False


def cancel_on_sigterm(enabled: bool = True) -> None:
    """Make SIGTERM cancel the work of `run_blocking` as Ctrl-C does (the CLI's choice; a library leaves the
    process's signal handling alone). Raising from a signal handler at an arbitrary point of the event loop would
    tear through asyncio and autogen instead, and print their shutdown errors."""
    global _SIGTERM_CANCELS
    _SIGTERM_CANCELS = enabled


async def _cancelled_by_sigterm(work: Coroutine[Any, Any, R], terminated: list[bool]) -> R:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is None or threading.current_thread() is not threading.main_thread():
        return await work

    def terminate() -> None:
        terminated.append(True)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await work
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _run(work: Coroutine[Any, Any, R]) -> R:
    if not _SIGTERM_CANCELS:
        return asyncio.run(work)
    terminated: list[bool] = []
    wrapper = _cancelled_by_sigterm(work, terminated)
    try:
        return asyncio.run(wrapper)
    except asyncio.CancelledError:
        if terminated:
            raise Terminated from None
        raise
    finally:
        # The wrapper too, like the work in run_blocking: a Ctrl-C before the loop started it left it never
        # awaited, and CPython's warning came after the one-line "interrupted" message.
        wrapper.close()


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
            return _run(work)
        log.info("called inside a running event loop: running in a worker thread (await the async form to avoid)")
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="debate-sync") as pool:
            return pool.submit(asyncio.run, work).result()
    finally:
        # A no-op for a coroutine that ran to its end; marks one that never started as closed, without a warning.
        work.close()
