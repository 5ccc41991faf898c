"""The job worker: claims audits from the store, runs them through the Verifier, stores the reports.

Runs inside `debate serve` (by default) or as `debate worker --db URL` on any machine that reaches the store. Every
outcome is typed: a report is stored as produced; a transient failure (endpoint down, a claim left unverifiable
for a transient reason) goes back to the queue with backoff and is never stored as finished work; an unusable item
fails with its reason; a lease that could not be renewed (cancelled, or taken over after a stall) stops the work.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from contextlib import AsyncExitStack
from typing import Any

from pydantic import ValidationError

from debate.api import Verifier
from debate.batch import BatchItem
from debate.errors import DebateError, InputError, ModelRequestError
from debate.jsonl import is_final
from desk.models import AuditOverrides, AuditRequest
from desk.settings import DeskSettings
from desk.store import Job, Store

__all__ = ["Worker"]

log = logging.getLogger(__name__)


class Worker:
    """Claims and runs audits until `stop` is set; `jobs` audits at once."""

    def __init__(self, store: Store, settings: DeskSettings, *, name: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:04x}"
        self._verifiers: dict[str, Verifier] = {}
        self._stack = AsyncExitStack()
        self._base: Verifier | None = None
        self.running: dict[int, asyncio.Task[None]] = {}
        """Audit id -> the task running it."""
        self.started = asyncio.Event()
        """Set once the model is ready (the embedded one can take a while to start)."""

    async def run(self, stop: asyncio.Event) -> None:
        jobs = max(1, self.settings.jobs)
        running = self.running
        async with self._stack:
            self._base = await self._stack.enter_async_context(Verifier(config=self.settings.verifier))
            self.started.set()
            log.info("worker %s ready (model %s)", self.name, self._base.client.model_name)
            renew_every = self.settings.lease_s / 3
            last_renew = float("-inf")  # the first pass already looks for expired leases
            try:
                while not stop.is_set():
                    while len(running) < jobs and not stop.is_set():
                        job = await asyncio.to_thread(self.store.claim, self.name, self.settings.lease_s)
                        if job is None:
                            break
                        running[job.audit_id] = asyncio.create_task(self._run(job), name=f"audit-{job.audit_id}")
                    now = asyncio.get_running_loop().time()
                    if now - last_renew >= renew_every:
                        # Leases move on this cadence, so expired ones need no closer look than this either.
                        last_renew = now
                        await asyncio.to_thread(self.store.requeue_expired)
                        lost = await asyncio.to_thread(
                            self.store.renew, self.name, list(running), self.settings.lease_s
                        )
                        for audit_id in lost:
                            log.info("audit %s: no longer ours (cancelled or taken over); stopping it", audit_id)
                            running[audit_id].cancel()
                    waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop.wait()), *running.values()}
                    _done, _ = await asyncio.wait(
                        waiters, timeout=min(self.settings.poll_s, renew_every), return_when=asyncio.FIRST_COMPLETED
                    )
                    for future in waiters - set(running.values()):
                        future.cancel()
                    for audit_id, task in list(running.items()):
                        if task.done():
                            del running[audit_id]
                            if not task.cancelled() and task.exception() is not None:
                                log.error("audit %s: worker error", audit_id, exc_info=task.exception())
            finally:
                await self._release(running)

    async def _release(self, running: dict[int, asyncio.Task[None]]) -> None:
        for task in running.values():
            task.cancel()
        # Their outcomes are the cancellation just asked for; each audit goes back to the queue below.
        await asyncio.gather(*running.values(), return_exceptions=True)
        if running:
            # Handed back at once rather than after the lease: a stopped worker's audits are redone by the next one.
            await asyncio.shield(asyncio.to_thread(self.store.release, self.name, list(running)))

    async def _verifier(self, overrides: AuditOverrides) -> Verifier:
        assert self._base is not None
        if overrides.is_empty():
            return self._base
        key = overrides.model_dump_json(exclude_none=True)
        if key not in self._verifiers:
            config = overrides.apply(self._base.worker_configs(1)[0])
            verifier = Verifier(config=config, client=self._base.client, attached_embedded=self._base.embedded)
            self._verifiers[key] = await self._stack.enter_async_context(verifier)
        return self._verifiers[key]

    async def _run(self, job: Job) -> None:
        request: AuditRequest = job.request
        store, worker = self.store, self.name
        try:
            verifier = await self._verifier(request.overrides)
            item = _item(request)
            report = await verifier.verify(
                request.response,
                question=request.question,
                reference=item.evidence(),
                reference_source=f"audit {job.audit_id}: reference",
                task=request.task,
                claims=item.claim_texts(),
            )
        except InputError as exc:
            await asyncio.to_thread(store.fail, job.audit_id, worker, f"input: {exc}")
            return
        except ModelRequestError as exc:
            reason = f"{exc.kind}: {exc}"
            if exc.fatal:
                log.error("audit %s: the endpoint refuses requests (%s); the audit waits", job.audit_id, exc)
            await self._defer(job, reason, fatal=exc.fatal)
            return
        except DebateError as exc:
            if exc.transient:
                await self._defer(job, f"{exc.kind}: {exc}", fatal=False)
            else:
                await asyncio.to_thread(store.fail, job.audit_id, worker, f"{exc.kind}: {exc}")
            return
        except ValidationError as exc:
            # A per-audit configuration the Verifier refuses (e.g. min_rounds above max_rounds): the item's fault.
            await asyncio.to_thread(store.fail, job.audit_id, worker, f"configuration: {exc}")
            return
        if not is_final({"result": report.model_dump(mode="json", include={"failure", "claims"})}):
            await self._defer(job, "a transient failure left claims unverifiable (endpoint unavailable)", fatal=False)
            return
        stored = await asyncio.to_thread(store.finish, job.audit_id, worker, report)
        if not stored:
            log.info("audit %s: result discarded (cancelled or taken over meanwhile)", job.audit_id)

    async def _defer(self, job: Job, reason: str, *, fatal: bool) -> None:
        delay = 60.0 if fatal else min(60.0, 2.0**job.attempts)
        status = await asyncio.to_thread(
            self.store.defer, job.audit_id, self.name, reason, delay_s=delay, max_attempts=self.settings.max_attempts
        )
        log.warning("audit %s: %s (%s)", job.audit_id, reason, status)


def _item(request: AuditRequest) -> BatchItem:
    return BatchItem(id="audit", response=request.response, reference=request.reference, claims=request.claims)
