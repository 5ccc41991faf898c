"""Every decision on record, off the request path and out of the guard's process: a writer process stores the
guard's decisions in the desk's store in batches, retrying while the database is away (a restart, a failover), and
flushes what is left on shutdown.

Why a process: writing a batch is Python work (SQLAlchemy, the claims' JSON) that, on a thread of the guard's
process, holds the GIL while the event loop waits; measured with benchmarks/bench_guard.py, it was most of the
guard's p99 added latency. The request path only queues a decision; `gather_s` later (20 ms), what was decided since
is turned into plain column values (`GuardRows`) and goes down a pipe as one frame, written without blocking by the
loop: one conversion loop, one pickling and one write for many decisions, none of it in a request's time. The writer
batches what comes within `linger_s` and reports through shared counters how many are stored and whether the store
refuses writes.

When the backlog is full (the database has been away for long), `full` is true and the app treats the decision as
one that could not be kept (`on_failure` decides). The writer ignores SIGINT and SIGTERM, which a Ctrl-C or
systemd's stop sends to every process of the guard: it stops when the pipe ends, because the guard closed it after
draining its requests or because the guard is gone, once what reached it is stored. A writer that dies (killed) is
replaced at the next decision, and what it held is counted as dropped."""

from __future__ import annotations

import asyncio
import atexit
import logging
import multiprocessing
import os
import pickle
from collections import Counter
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from typing import Any, BinaryIO

from markov_debate.desk.logs import server_logging
from markov_debate.desk.store import GuardRecord, GuardRows
from markov_debate.guard.writer import FAILING_SINCE, GIVEN_UP, HEAD, STORED, serve_writer

__all__ = ["Recorder"]

log = logging.getLogger("markov_debate.guard")


class _Lost(asyncio.Protocol):
    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # the writer died: the next decision replaces it (Recorder._send)
            log.error("guard: the pipe to the decision writer broke: %s", exc)


@dataclass
class _Child:
    process: SpawnProcess
    pipe: asyncio.WriteTransport
    end: BinaryIO
    """The pipe's end the transport writes to (closing it twice is harmless)."""
    tally: Any  # a shared array of doubles, indexed by STORED, GIVEN_UP, FAILING_SINCE


class Recorder:
    """Stores GuardRecords from a process of its own (see the module docstring). Used on one event loop: `start`
    and `close` are awaited on it, `add` called from it."""

    def __init__(
        self,
        db_url: str,
        *,
        batch: int = 200,
        max_pending: int = 50_000,
        linger_s: float = 0.05,
        gather_s: float = 0.02,
    ) -> None:
        self._db_url = db_url
        self._batch, self._linger_s, self._max, self._gather_s = batch, linger_s, max_pending, gather_s
        # spawn: the guard's threads, event loop and connections are not copied into the writer
        self._context = multiprocessing.get_context("spawn")
        self._child: _Child | None = None
        self._retired = [0.0, 0.0]  # stored and given up by writers replaced before this one
        self._sent = 0
        self._outbox: list[GuardRecord] = []
        self._replacing = self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0
        """Decisions never handed to a writer (backlog past twice its limit) or held by a writer that died."""
        self.actions: Counter[str] = Counter()
        """What the guard did with each answer (passed, annotated, flagged, blocked, ...), for /metrics."""

    async def _new_child(self) -> _Child:
        reader, writer = self._context.Pipe(duplex=False)
        tally = self._context.Array("d", 3, lock=False)
        args = (self._db_url, reader, (log.getEffectiveLevel(), server_logging()), self._batch, self._linger_s, tally)
        process = self._context.Process(target=serve_writer, args=args, name="guard-recorder", daemon=True)
        process.start()
        reader.close()  # only the writer holds the reading end: the pipe ends when the guard's end closes
        end = os.fdopen(os.dup(writer.fileno()), "wb", buffering=0)
        writer.close()
        transport, _ = await asyncio.get_running_loop().connect_write_pipe(_Lost, end)
        return _Child(process=process, pipe=transport, end=end, tally=tally)

    def _tally(self, index: int) -> float:
        return float(self._child.tally[index]) if self._child is not None else 0.0

    @property
    def stored(self) -> int:
        return int(self._retired[0] + self._tally(STORED))

    @property
    def pending(self) -> int:
        settled = self._retired[0] + self._retired[1] + self._tally(STORED) + self._tally(GIVEN_UP)
        return self._sent - self.dropped - int(settled)

    @property
    def full(self) -> bool:
        return self.pending >= self._max

    @property
    def failing_since(self) -> float | None:
        """When the store began refusing writes (None while it takes them)."""
        return self._tally(FAILING_SINCE) or None

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id (None before `start`)."""
        return self._child.process.pid if self._child is not None else None

    async def start(self) -> None:
        self._child = await self._new_child()
        # Registered after multiprocessing's own exit handler, so run before it: that one waits for every child,
        # and the writer leaves only once its pipe ends. Without `close` (the guard's lifespan never finished), the
        # interpreter's exit would otherwise wait for ever.
        atexit.register(self._end_pipe)

    def _end_pipe(self) -> None:
        child = self._child
        if child is None:
            return
        # The guard leaves without `close` (its lifespan never finished): what waits for its frame is written now,
        # unless a frame is part-way out (the loop that would finish it is gone; another would corrupt it).
        if self._outbox and not child.end.closed and child.pipe.get_write_buffer_size() == 0:
            frame, count = self._frame()
            try:
                child.end.write(frame)
            except OSError as exc:
                self.dropped += count
                log.error("guard: %d decision(s) lost at exit: the writer cannot take them (%s)", count, exc)
        child.end.close()

    def add(self, record: GuardRecord) -> None:
        """Queue `record`; past twice the backlog limit it is dropped and counted (memory stays bounded while the
        store is away for very long: by then every answer is already marked as not kept, see `full`)."""
        if self.pending >= 2 * self._max:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("guard: %d decision(s) dropped: the store has been away too long", self.dropped)
            return
        if not self._outbox:
            # One frame for every decision made within gather_s, not a conversion and a write each: at 100
            # requests a second, a write each cost every request ~0.1 ms of the guard's CPU (bench_guard.py).
            asyncio.get_running_loop().call_later(self._gather_s, self._send)
        self._outbox.append(record)
        self._sent += 1

    def _send(self) -> None:
        child = self._child
        if child is None or not self._outbox or self._replacing or self._closed:
            return
        if child.pipe.is_closing() or not child.process.is_alive():
            self._replacing = True
            task = asyncio.get_running_loop().create_task(self._replace(child))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._flush(child)

    def _flush(self, child: _Child) -> None:
        child.pipe.write(self._frame()[0])

    def _frame(self) -> tuple[bytes, int]:
        """The waiting decisions as one frame, and how many it holds (the outbox is emptied)."""
        records, self._outbox = self._outbox, []
        rows = []
        for record in records:
            try:
                converted = GuardRows.of(record)
            except (ValueError, TypeError) as exc:  # one decision that cannot be written must not cost the rest
                self.dropped += 1
                log.error("guard: decision %s cannot be stored, dropped: %s", record.request_id, exc)
                continue
            rows.append((converted.audit, converted.decision))
        frame = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
        return HEAD.pack(len(frame)) + frame, len(rows)

    async def _replace(self, old: _Child) -> None:
        if not old.pipe.is_closing():  # asyncio closes it itself when it sees the reading end gone
            old.pipe.abort()
        if old.process.is_alive():  # its pipe broke, yet it runs: it cannot be trusted with more
            old.process.kill()
        await asyncio.to_thread(old.process.join, 5)
        try:
            new = await self._new_child()
        except (OSError, RuntimeError) as exc:
            log.error("guard: a new decision writer could not be started: %s", exc)
            self._replacing = False
            return
        # What the old writer was handed and did not settle is lost with it; what waits here goes to the new one.
        lost = self.pending - len(self._outbox)
        self.dropped += lost
        self._retired[0] += old.tally[STORED]
        self._retired[1] += old.tally[GIVEN_UP]
        self._child, self._replacing = new, False
        log.error(
            "guard: the decision writer stopped (exit code %s) holding %d decision(s), lost; a new one starts",
            old.process.exitcode,
            lost,
        )
        self._send()

    async def close(self, timeout_s: float = 30.0) -> int:
        """Store what is queued, then stop; the number of decisions left unstored (0 normally)."""
        for task in list(self._tasks):
            await task
        child = self._child
        if child is None:
            return 0
        self._closed = True
        # A writer found dead now is not replaced: what waits here is counted as not stored.
        if self._outbox and child.process.is_alive() and not child.pipe.is_closing():
            self._flush(child)
        child.pipe.close()  # written out first, then the pipe ends: the writer stores the rest and leaves
        await asyncio.to_thread(child.process.join, timeout_s)
        atexit.unregister(self._end_pipe)
        left = self.pending
        if child.process.is_alive():
            child.process.kill()  # it ignores SIGTERM (see the module docstring)
            await asyncio.to_thread(child.process.join, 5)
        if child.process.exitcode != 0 or left:
            log.error("guard: stopped with %d decision(s) not stored", left)
        return left
