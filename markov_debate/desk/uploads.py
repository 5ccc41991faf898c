"""Where batch uploads are parsed, checked and queued: a small pool of processes of their own. A 10 MB upload is
seconds of CPU (JSON, validation of every line, the insert); in a thread of the server's process it holds the GIL
against the event loop and every other route, which put `/v1/health` at 6 s during three such uploads. In another
process it costs the server nothing but the wait.

Each process opens the store once (from the URL the server uses) and keeps it. A failure comes back as a typed
outcome and is raised here as the HTTP error it means; a process that dies is replaced at the next upload and the
upload it was working on is a 503 (nothing of it was committed: a batch is one transaction)."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException

from markov_debate.desk.auth import Principal
from markov_debate.desk.models import BatchInfo
from markov_debate.desk.settings import DeskSettings

__all__ = ["UploadPool"]

log = logging.getLogger(__name__)

_child: tuple[object, DeskSettings] | None = None
"""In a pool process: its store and the settings (set by _start)."""


@dataclass(frozen=True)
class _Outcome:
    """What an ingest came to, in a form that crosses the process boundary."""

    batch: BatchInfo | None = None
    created: bool = False
    status: int = 0
    detail: str = ""
    retry_after: str | None = None


def _start(db_url: str, settings: DeskSettings) -> None:
    global _child
    from markov_debate.desk.store import Store

    parent = multiprocessing.parent_process()
    if parent is not None:
        # A server killed with SIGKILL cannot stop its pool: each process leaves with it instead of living on
        # (holding the server's log and its store open) as an orphan.
        threading.Thread(target=_leave_with, args=(parent.sentinel,), daemon=True).start()
    _child = (Store(db_url), settings)


def _leave_with(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _ingest(path: Path, principal: Principal, task: str, name: str, idempotency_key: str | None) -> _Outcome:
    from markov_debate.desk.ingest import IngestError, ingest
    from markov_debate.desk.store import ConflictError, PendingLimitError, Store, StoreError

    assert _child is not None, "the pool's initializer opens the store"
    store, settings = _child
    assert isinstance(store, Store)
    try:
        batch, created = ingest(
            path,
            store=store,
            principal=principal,
            task=task,
            name=name,
            settings=settings,
            idempotency_key=idempotency_key,
        )
    except IngestError as exc:
        return _Outcome(status=exc.status, detail=str(exc))
    except PendingLimitError as exc:  # the key's cap on waiting audits
        return _Outcome(status=429, detail=str(exc), retry_after=str(exc.retry_after_s))
    except ConflictError as exc:
        return _Outcome(status=409, detail=str(exc))
    except StoreError as exc:
        return _Outcome(status=400, detail=str(exc))
    return _Outcome(batch=batch, created=created)


class UploadPool:
    """The processes uploads are ingested in, started at the first upload and stopped with the app."""

    def __init__(self, db_url: str, settings: DeskSettings, processes: int = 2) -> None:
        self.db_url, self.settings, self.processes = db_url, settings, processes
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.processes,
                # spawn: the server's threads and open connections are not copied into the child
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(self.db_url, self.settings),
            )
        return self._pool

    async def ingest(
        self, path: Path, *, principal: Principal, task: str, name: str, idempotency_key: str | None
    ) -> tuple[BatchInfo, bool]:
        """Queue the upload at `path` (see markov_debate.desk.ingest.ingest); its failure as an HTTPException."""
        loop = asyncio.get_running_loop()
        try:
            outcome = await loop.run_in_executor(
                self._executor(), _ingest, path, principal, task, name, idempotency_key
            )
        except BrokenProcessPool:
            log.error("an upload process died; it is replaced at the next upload")
            self._pool = None
            raise HTTPException(
                503,
                "the upload could not be processed (its worker process stopped); send it again",
                headers={"Retry-After": "5"},
            ) from None
        if outcome.batch is None:
            headers = {"Retry-After": outcome.retry_after} if outcome.retry_after else None
            raise HTTPException(outcome.status, outcome.detail, headers=headers)
        return outcome.batch, outcome.created

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
