"""`--workers N`: the same work on N processes, results back in input order to one writer (this process).

One Python process is bound to one core; at high concurrency the engine (autogen's group chat, pydantic, the
event loop) needs more than one. A `Job` is a picklable recipe: each worker process builds its state once (a
Verifier, a method) and then handles items sent to it. The parent hands out at most `limit` items at a time, so
its reorder buffer and the workers' queues stay bounded on any input length; the caller writes what this yields,
so resume, the output lock and grouped fsync are exactly the single-process ones. An error raised for an item
(typed errors pickle as themselves) surfaces when that item's result is due, as in `ordered_map`; a worker that
dies stops the run with what was written kept.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import queue
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from multiprocessing.process import BaseProcess
from typing import Any, Protocol, TypeVar

from debate.concurrency import run_blocking
from debate.errors import UsageError, WorkerError
from debate.llm import SharedRates, adopt_shared

__all__ = ["Job", "WorkerError", "process_map", "resolve_workers"]

T = TypeVar("T")
R = TypeVar("R")
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)

_POLL_S = 0.5


class Job(Protocol[T_contra, R_co]):
    """Picklable. `open(worker)` runs once in each worker process (numbered from 0, fewer than `workers`) and yields
    the per-item handler; `workers` is how many processes the job is made for."""

    @property
    def workers(self) -> int: ...

    def open(self, worker: int) -> AbstractAsyncContextManager[Callable[[T_contra], Awaitable[R_co]]]: ...


def resolve_workers(value: str | int) -> int:
    """`auto` is the number of cores this process may use; else a positive integer."""
    if value == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    number = int(value)
    if number < 1:
        raise UsageError(f"--workers must be at least 1 or auto, got {value}")
    return number


def _portable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # anything unpicklable is sent as its description instead
        return WorkerError(f"in a worker process: {type(exc).__name__}: {exc}")
    return exc


async def _serve(job: Job[Any, Any], worker: int, tasks: Any, results: Any, slots: int) -> None:
    loop = asyncio.get_running_loop()
    reader = ThreadPoolExecutor(1, thread_name_prefix="worker-inbox")
    running: set[asyncio.Task[None]] = set()
    try:
        async with job.open(worker) as handle:
            gate = asyncio.Semaphore(slots)

            async def one(seq: int, item: Any) -> None:
                try:
                    results.put(("ok", seq, await handle(item)))
                except Exception as exc:  # sent to the parent, which raises it when the item is due
                    results.put(("error", seq, _portable(exc)))
                finally:
                    gate.release()

            while True:
                await gate.acquire()  # taking no more than our share keeps the other workers fed
                message = await loop.run_in_executor(reader, tasks.get)
                if message is None:
                    break
                task = asyncio.create_task(one(*message))
                running.add(task)
                task.add_done_callback(running.discard)
            await asyncio.gather(*running)
    except Exception as exc:  # the job could not start (or stop): the parent stops the run
        results.put(("fatal", -1, _portable(exc)))
    finally:
        reader.shutdown(wait=False, cancel_futures=True)


def _worker_main(job: Job[Any, Any], worker: int, tasks: Any, results: Any, slots: int, rates: SharedRates) -> None:
    adopt_shared(rates)  # the run's rate limits are one schedule across its processes
    run_blocking(_serve(job, worker, tasks, results, slots))


def _start_workers(
    context: Any, job: Job[Any, Any], queues: tuple[Any, Any], slots: int, rates: SharedRates
) -> list[BaseProcess]:
    tasks, results = queues
    processes: list[BaseProcess] = [
        context.Process(
            target=_worker_main, args=(job, k, tasks, results, slots, rates), daemon=True, name=f"debate-worker-{k}"
        )
        for k in range(job.workers)
    ]
    for process in processes:
        process.start()
    return processes


def _check_alive(processes: list[BaseProcess]) -> None:
    dead = [p for p in processes if not p.is_alive()]
    if dead:
        raise WorkerError(
            f"worker process {dead[0].name} exited with code {dead[0].exitcode}; the records written so far are "
            "kept, re-run to resume"
        )


async def _stop_workers(
    processes: list[BaseProcess], queues: tuple[Any, Any], waiter: ThreadPoolExecutor, *, clean: bool
) -> None:
    """Ask each worker to finish, give it a moment (more after a clean run), then terminate what is left."""
    tasks, results = queues
    loop = asyncio.get_running_loop()
    for _ in processes:
        tasks.put(None)
    for process in processes:
        await loop.run_in_executor(waiter, process.join, 5.0 if clean else 0.5)
        if process.is_alive():
            process.terminate()
            await loop.run_in_executor(waiter, process.join, 5.0)
    waiter.shutdown(wait=False, cancel_futures=True)
    tasks.close()
    results.close()


async def process_map(items: Iterable[T], job: Job[T, R], *, limit: int) -> AsyncIterator[R]:
    """Run `job` over `items` on `job.workers` processes (spawned: no event loop or thread is forked), at most
    `limit` items out at once, yielding results in input order."""
    workers = job.workers
    if workers < 1 or limit < 1:
        raise ValueError("workers and limit must be at least 1")
    context = multiprocessing.get_context("spawn")
    tasks = context.Queue()
    results = context.Queue()
    slots = max(1, -(-limit // workers))
    # Kept referenced until the workers stop: a child rebuilds the lock from its name, gone once the parent's is.
    rates = SharedRates.for_processes(context)
    processes = _start_workers(context, job, (tasks, results), slots, rates)
    loop = asyncio.get_running_loop()
    waiter = ThreadPoolExecutor(1, thread_name_prefix="results")

    def receive() -> tuple[str, int, Any] | None:
        try:
            message: tuple[str, int, Any] = results.get(timeout=_POLL_S)
        except queue.Empty:
            return None
        return message

    buffer: dict[int, tuple[str, Any]] = {}
    source = iter(items)
    sent = due = 0
    exhausted = False
    clean = False
    try:
        while True:
            while not exhausted and sent - due < limit:
                try:
                    item = next(source)
                except StopIteration:
                    exhausted = True
                    break
                tasks.put((sent, item))
                sent += 1
            if exhausted and due == sent:
                break
            message = await loop.run_in_executor(waiter, receive)
            if message is None:
                _check_alive(processes)
                continue
            kind, seq, payload = message
            if kind == "fatal":
                raise payload
            buffer[seq] = (kind, payload)
            while due in buffer:
                kind, payload = buffer.pop(due)
                due += 1
                if kind == "error":
                    raise payload
                yield payload
        clean = True
    finally:
        await _stop_workers(processes, (tasks, results), waiter, clean=clean)
