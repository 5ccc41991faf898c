"""The decision writer, the process side of debate guard's record (markov_debate.guard.record starts it): it reads
the guard's frames from a pipe, stores them in the desk's store in batches, retries while the database is away, and
reports through shared counters. It ignores SIGINT and SIGTERM and stops when the pipe ends, once what reached it
is stored."""

from __future__ import annotations

import logging
import pickle
import queue
import signal
import struct
import threading
import time
from collections.abc import Callable, MutableSequence, Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError
from tenacity import Retrying, retry_if_exception, wait_random_exponential

from debate.cli.conventions import log_handler
from markov_debate.desk.logs import configure_server_logging
from markov_debate.desk.store import GuardRows, Store, StoreError
from markov_debate.desk.store.db import store_away, store_cause

__all__ = ["FAILING_SINCE", "GIVEN_UP", "HEAD", "STORED", "RowStore", "Writer", "first_line", "serve_writer"]

log = logging.getLogger("markov_debate.guard")

HEAD = struct.Struct("!I")
"""A frame's length, before the frame (a pickled list of rows as (audit, decision) column values)."""
# Where the writer reports, in a shared array of doubles (exact for counts far past any run's).
STORED, GIVEN_UP, FAILING_SINCE = range(3)


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
            if not self._tally[FAILING_SINCE]:
                self._tally[FAILING_SINCE] = time.monotonic()
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
                log.error("guard: %d decision(s) could not be stored before shutdown: %s", len(rows), first_line(exc))
                self._tally[GIVEN_UP] += len(rows)
                return
            # The store is there and refuses these rows: retried, they would hold every decision behind them for
            # ever. One at a time; the one refused is dropped, counted and named (never the statement: it holds
            # the caller's text).
            if len(rows) > 1:
                for one in rows:
                    self._write([one])
                return
            log.error("guard: decision %s cannot be stored: %s", rows[0].decision["request_id"], first_line(exc))
            self._tally[GIVEN_UP] += 1
            return
        # A request id stored before (a batch retried after a lost reply) is settled too: not left as waiting.
        self._tally[STORED] += stored
        self._tally[GIVEN_UP] += len(rows) - stored
        if self._tally[FAILING_SINCE]:
            log.warning(
                "guard: the store takes writes again (after %.0f s)", time.monotonic() - self._tally[FAILING_SINCE]
            )
            self._tally[FAILING_SINCE] = 0.0


def serve_writer(db_url: str, rows: Connection, logs: tuple[int, Any], batch: int, linger_s: float, tally: Any) -> None:
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
        while len(head := pipe.read(HEAD.size)) == HEAD.size:
            (size,) = HEAD.unpack(head)
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
                log.error("guard: the store cannot be opened to write decisions: %s", first_line(exc))
                return None
            if not tally[FAILING_SINCE]:
                tally[FAILING_SINCE] = time.monotonic()
                log.error("guard: the store cannot be opened to write decisions (%s); they wait", first_line(exc))
            time.sleep(1.0)


def _cause(state: Any) -> str:
    exc = state.outcome.exception() if getattr(state, "outcome", None) is not None else None
    return first_line(exc) if exc else "unknown"


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {store_cause(exc, 200)}"
