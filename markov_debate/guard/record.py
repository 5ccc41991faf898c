"""Every decision on record, off the request path: a writer thread stores the guard's decisions in the desk's store
in batches, retrying while the database is away (a restart, a failover) and flushing what is left on shutdown.

The request path only appends to a bounded queue. When the queue is full (the database has been away for long),
`full` is true and the app treats the decision as one that could not be kept (`on_failure` decides)."""

from __future__ import annotations

import logging
import queue
import threading
import time

from sqlalchemy.exc import SQLAlchemyError
from tenacity import Retrying, retry_if_exception_type, wait_random_exponential

from markov_debate.desk.store import GuardRecord, Store

__all__ = ["Recorder"]

log = logging.getLogger("markov_debate.guard")

_STOP = object()


class Recorder:
    """Stores GuardRecords in the background (see the module docstring)."""

    def __init__(self, store: Store, *, batch: int = 200, max_pending: int = 50_000, linger_s: float = 0.05) -> None:
        self._store = store
        self._linger_s = linger_s
        self._batch = batch
        self._max = max_pending
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="guard-recorder", daemon=True)
        self._stopping = threading.Event()
        self.stored = 0
        self.dropped = 0
        self.failing_since: float | None = None
        """When the store began refusing writes (None while it takes them)."""

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    @property
    def full(self) -> bool:
        return self._queue.qsize() >= self._max

    def start(self) -> None:
        self._thread.start()

    def add(self, record: GuardRecord) -> None:
        """Queue `record`; past twice the backlog limit it is dropped and counted (memory stays bounded while the
        store is away for very long: by then every answer is already marked as not kept, see `full`)."""
        if self._queue.qsize() >= 2 * self._max:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("guard: %d decision(s) dropped: the store has been away too long", self.dropped)
            return
        self._queue.put(record)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            records = [first]
            stop = False
            # What comes within `linger_s` of the first joins its batch: one transaction for many decisions costs
            # the guard's process far less time than one each (a decision waits at most that long to be written).
            until = time.monotonic() + self._linger_s
            while len(records) < self._batch:
                try:
                    item = self._queue.get(timeout=max(0.0, until - time.monotonic()))
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                records.append(item)
            self._write([r for r in records if isinstance(r, GuardRecord)])
            if stop:
                return

    def _write(self, records: list[GuardRecord]) -> None:
        def waiting(state: object) -> None:
            if self.failing_since is None:
                self.failing_since = time.monotonic()
                log.error("guard: the store refuses writes (%s); %d decision(s) wait", _cause(state), self.pending)

        # Retried without end while running (a decision is not dropped because the database restarts); on
        # shutdown for 10 s at most, then what is left is counted in the log.
        retrying = Retrying(
            retry=retry_if_exception_type(SQLAlchemyError),
            wait=wait_random_exponential(multiplier=0.2, max=5.0),
            stop=lambda state: self._stopping.is_set() and (state.seconds_since_start or 0.0) > 10,
            before_sleep=waiting,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    self.stored += self._store.record_guarded(records)
        except SQLAlchemyError as exc:
            log.error("guard: %d decision(s) could not be stored before shutdown: %s", len(records), exc)
            return
        except (ValueError, TypeError) as exc:
            # One record the store cannot take (e.g. text it cannot encode) must not cost the batch: one at a time.
            if len(records) > 1:
                for record in records:
                    self._write([record])
                return
            log.error("guard: decision %s cannot be stored: %s: %s", records[0].request_id, type(exc).__name__, exc)
            return
        if self.failing_since is not None:
            log.warning("guard: the store takes writes again (after %.0f s)", time.monotonic() - self.failing_since)
            self.failing_since = None

    def close(self, timeout_s: float = 30.0) -> int:
        """Store what is queued, then stop; the number of decisions left unstored (0 normally)."""
        self._stopping.set()
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        left = self._queue.qsize()
        if left or self._thread.is_alive():
            log.error("guard: stopped with %d decision(s) not stored", left)
        return left


def _cause(state: object) -> str:
    outcome = getattr(state, "outcome", None)
    exc = outcome.exception() if outcome is not None else None
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if exc else "unknown"
