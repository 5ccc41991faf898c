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
import queue
import signal
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any, BinaryIO, Protocol

from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError
from tenacity import Retrying, retry_if_exception, wait_random_exponential

from debate.cli.conventions import log_handler
from markov_debate.desk.logs import configure_server_logging, server_logging
from markov_debate.desk.store import GuardRecord, GuardRows, Store, StoreError
from markov_debate.desk.store.db import store_away, store_cause

__all__ = ["Recorder", "RowStore", "Writer"]

log = logging.getLogger("markov_debate.guard")

_HEAD = struct.Struct("!I")
"""A frame's length, before the frame (a pickled list of rows as (audit, decision) column values)."""
# Where the writer reports, in a shared array of doubles (exact for counts far past any run's).
_STORED, _GIVEN_UP, _FAILING_SINCE = range(3)


class RowStore(Protocol):
    """What the writer needs of a store."""

    def record_rows(self, rows: Sequence[GuardRows]) -> int: ...


class Writer:
    """The writer process's loop: takes rows from a queue and stores them in batches (see the module docstring).
    `tally` is where it reports; `ended` says no more rows will come (the guard stopped or is gone): the loop then
    stores what is queued, and a write the store refuses is retried for 10 s at most."""

    def __init__(
        self,
        store: RowStore,
        tally: MutableSequence[float],
        *,
        ended: Callable[[], bool],
        batch: int = 200,
        linger_s: float = 0.05,
    ) -> None:
        self._store, self._tally = store, tally
        self._ended = ended
        self._batch, self._linger_s = batch, linger_s

    def run(self, get: Callable[[bool, float], GuardRows]) -> None:
        """Store what `get` (a queue's `get`) gives until nothing more comes (`ended`) and all is written."""
        while True:
            try:
                first = get(True, 1.0)
            except queue.Empty:
                if self._ended():
                    return
                continue
            rows = [first]
            # What comes within `linger_s` of the first joins its batch: one transaction for many decisions costs
            # far less than one each (a decision waits at most that long to be written).
            until = time.monotonic() + self._linger_s
            while len(rows) < self._batch:
                try:
                    rows.append(get(True, max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            self._write(rows)

    def _write(self, rows: list[GuardRows]) -> None:
        def waiting(state: object) -> None:
            if not self._tally[_FAILING_SINCE]:
                self._tally[_FAILING_SINCE] = time.monotonic()
                log.error("guard: the store refuses writes (%s); decisions wait", _cause(state))

        # Retried without end while the guard runs (a decision is not dropped because the database restarts);
        # once it stops, for 10 s at most, then what is left is counted in the log.
        retrying = Retrying(
            retry=retry_if_exception(store_away),  # away (a restart): retried; refused rows are not (below)
            wait=wait_random_exponential(multiplier=0.2, max=5.0),
            stop=lambda state: self._ended() and (state.seconds_since_start or 0.0) > 10,
            before_sleep=waiting,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    stored = self._store.record_rows(rows)
        except (SQLAlchemyError, OSError, ValueError, TypeError) as exc:
            if store_away(exc):
                log.error("guard: %d decision(s) could not be stored before shutdown: %s", len(rows), _first_line(exc))
                self._tally[_GIVEN_UP] += len(rows)
                return
            # The store is there and refuses these rows: retried, they would hold every decision behind them for
            # ever. One at a time; the one refused is dropped, counted and named (never the statement: it holds
            # the caller's text).
            if len(rows) > 1:
                for one in rows:
                    self._write([one])
                return
            log.error("guard: decision %s cannot be stored: %s", rows[0].decision["request_id"], _first_line(exc))
            self._tally[_GIVEN_UP] += 1
            return
        # A request id stored before (a batch retried after a lost reply) is settled too: not left as waiting.
        self._tally[_STORED] += stored
        self._tally[_GIVEN_UP] += len(rows) - stored
        if self._tally[_FAILING_SINCE]:
            log.warning(
                "guard: the store takes writes again (after %.0f s)", time.monotonic() - self._tally[_FAILING_SINCE]
            )
            self._tally[_FAILING_SINCE] = 0.0


def _serve(db_url: str, rows: Connection, logs: tuple[int, Any], batch: int, linger_s: float, tally: Any) -> None:
    """The writer process; its log as the guard's (`debate guard`'s format, timestamps, one line a record)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if logs[1] is not None:
        configure_server_logging(logs[1][0], verbose=logs[1][1])
    else:  # a guard run in process (tests): the engine's console
        logging.basicConfig(level=logs[0], handlers=[log_handler(Console(stderr=True))], force=True)
    taken: queue.Queue[GuardRows] = queue.Queue()
    ended = threading.Event()
    # The pipe is read on a thread of its own, so it never fills while a batch waits for the database.
    threading.Thread(target=_read, args=(rows, taken, ended), daemon=True).start()
    store = _open(db_url, tally, ended.is_set)
    if store is None:
        return
    try:
        Writer(store, tally, ended=ended.is_set, batch=batch, linger_s=linger_s).run(taken.get)
    finally:
        store.close()


def _read(rows: Connection, taken: queue.Queue[GuardRows], ended: threading.Event) -> None:
    """Frames from the guard (a length, then a pickled list of rows) until the pipe ends: the guard closed it to
    stop, or is gone (killed with SIGKILL: the writer stores what reached it and leaves too)."""
    with open(rows.fileno(), "rb", closefd=False) as pipe:
        while len(head := pipe.read(_HEAD.size)) == _HEAD.size:
            (size,) = _HEAD.unpack(head)
            frame = pipe.read(size)
            if len(frame) < size:
                break
            for audit, decision in pickle.loads(frame):
                taken.put(GuardRows(audit, decision))
    ended.set()


def _open(db_url: str, tally: Any, stopping: Callable[[], bool]) -> Store | None:
    """The store, once it opens (the guard opened it a moment ago, but the database may have gone since)."""
    while True:
        try:
            return Store(db_url)
        except (SQLAlchemyError, StoreError) as exc:
            if stopping():
                log.error("guard: the store cannot be opened to write decisions: %s", _first_line(exc))
                return None
            if not tally[_FAILING_SINCE]:
                tally[_FAILING_SINCE] = time.monotonic()
                log.error("guard: the store cannot be opened to write decisions (%s); they wait", _first_line(exc))
            time.sleep(1.0)


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
    tally: Any  # a shared array of doubles, indexed by _STORED, _GIVEN_UP, _FAILING_SINCE


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
        process = self._context.Process(target=_serve, args=args, name="guard-recorder", daemon=True)
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
        return int(self._retired[0] + self._tally(_STORED))

    @property
    def pending(self) -> int:
        settled = self._retired[0] + self._retired[1] + self._tally(_STORED) + self._tally(_GIVEN_UP)
        return self._sent - self.dropped - int(settled)

    @property
    def full(self) -> bool:
        return self.pending >= self._max

    @property
    def failing_since(self) -> float | None:
        """When the store began refusing writes (None while it takes them)."""
        return self._tally(_FAILING_SINCE) or None

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
        return _HEAD.pack(len(frame)) + frame, len(rows)

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
        self._retired[0] += old.tally[_STORED]
        self._retired[1] += old.tally[_GIVEN_UP]
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


def _cause(state: Any) -> str:
    exc = state.outcome.exception() if getattr(state, "outcome", None) is not None else None
    return _first_line(exc) if exc else "unknown"


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {store_cause(exc, 200)}"
