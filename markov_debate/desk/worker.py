"""The job worker: claims audits from the store, runs them through the Verifier, stores the reports.

Runs inside `debate serve` (by default) or as `debate worker --db URL` on any machine that reaches the store. Every
outcome is typed: a report is stored as produced; a transient failure (endpoint down, a claim left unverifiable
for a transient reason) goes back to the queue with backoff and is never stored as finished work; an unusable item
fails with its reason; a lease that could not be renewed (cancelled, or taken over after a stall) stops the work.

The worker is supervised from the inside: no audit and no outage stops it. A store error (a database restart, a
full disk) is logged once with its cause and the loop retries with backoff until the store answers again; an
endpoint outage (consecutive transient model failures) opens a circuit breaker that stops claiming until a probe
succeeds, and the audits it caught keep their attempts. `Worker.health()` says which of these it is in.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import SQLAlchemyError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_delay, wait_random_exponential

from debate.errors import DebateError, InputError, ModelRequestError
from debate.pipeline import Verifier
from debate.plugins import TaskInput
from debate.results import transient_failure
from markov_debate.desk.overrides import OverrideVerifiers
from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.runnable import work_item
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import Job, Store
from markov_debate.desk.store.db import store_away, store_cause

__all__ = ["Worker", "WorkerHealth"]

log = logging.getLogger(__name__)
T = TypeVar("T")

WorkerState = Literal["starting", "running", "store-unavailable", "endpoint-down", "stopped"]


class WorkerHealth(BaseModel):
    """What `/v1/health` says of an in-process worker."""

    state: WorkerState
    """running: claiming and finishing audits; store-unavailable / endpoint-down: waiting for it to come back."""
    last_error: str | None
    """The cause of the current (or last) trouble."""
    seconds_since_progress: float | None
    """Since the worker last completed a pass over the store (None: not yet)."""
    trouble_for_s: float | None = None
    """How long the current trouble (store-unavailable, endpoint-down) has lasted; None when running."""


class Worker:
    """Claims and runs audits until `stop` is set; `jobs` audits at once."""

    def __init__(self, store: Store, settings: DeskSettings, *, name: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:04x}"
        self._overrides: OverrideVerifiers | None = None
        self._stack = AsyncExitStack()
        self._base: Verifier | None = None
        self.running: dict[int, asyncio.Task[None]] = {}
        """Audit id -> the task running it."""
        self.started = asyncio.Event()
        """Set once the model is ready (the embedded one can take a while to start)."""
        self.state: WorkerState = "starting"
        self.last_error: str | None = None
        self._last_progress: float | None = None
        self._failures_in_a_row = 0
        """Consecutive transient endpoint failures; the breaker opens at `settings.breaker_failures`."""
        self._breaker_until = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._trouble_since: float | None = None

    def health(self) -> WorkerHealth:
        now = time.monotonic()
        since = None if self._last_progress is None else now - self._last_progress
        trouble = None if self._trouble_since is None else now - self._trouble_since
        return WorkerHealth(
            state=self.state, last_error=self.last_error, seconds_since_progress=since, trouble_for_s=trouble
        )

    @property
    def endpoint_down(self) -> bool:
        return self.state == "endpoint-down"

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        async with self._stack:
            if not await self._start_model(stop):
                self.state = "stopped"
                return
            renew_every = self.settings.lease_s / 3
            last_renew = float("-inf")  # the first pass already looks for expired leases
            pause = _Backoff(self.settings.poll_s, 30.0)
            try:
                while not stop.is_set():
                    try:
                        last_renew = await self._pass(last_renew, renew_every)
                    except (SQLAlchemyError, OSError) as exc:
                        self._trouble("store-unavailable", f"the audit store fails: {store_cause(exc)}")
                        await _wait(stop, pause.next())
                        continue
                    pause.reset()
                    await self._wait_for_work(stop, renew_every)
            finally:
                await self._release(self.running)
                self.state = "stopped"

    async def _start_model(self, stop: asyncio.Event) -> bool:
        """Start (or reach) the model, retrying while the endpoint is unreachable; False if stopped first."""
        pause = _Backoff(1.0, 60.0)
        while not stop.is_set():
            try:
                self._base = await self._stack.enter_async_context(Verifier(config=self.settings.verifier))
                self._overrides = OverrideVerifiers(self._base, self.settings.max_override_verifiers)
                self._stack.push_async_callback(self._overrides.aclose)
            except DebateError as exc:
                if not exc.transient and not isinstance(exc, ModelRequestError):
                    raise  # a configuration the worker can never run with: stopping says so at once
                self._trouble("endpoint-down", f"the model endpoint is not reachable: {exc}")
                await _wait(stop, pause.next())
                continue
            self.started.set()
            self._recovered()
            log.info("worker %s ready (model %s)", self.name, self._base.client.model_name)
            return True
        return False

    async def _pass(self, last_renew: float, renew_every: float) -> float:
        """One look at the store: claim what fits (unless the breaker is open), renew leases on their cadence."""
        running, jobs = self.running, max(1, self.settings.jobs)
        loop = asyncio.get_running_loop()
        probing = bool(self._breaker_until) and loop.time() >= self._breaker_until
        limit = 1 if probing else jobs  # half-open: one audit tells whether the endpoint is back
        while len(running) < limit and loop.time() >= self._breaker_until:
            job = await asyncio.to_thread(
                self.store.claim, self.name, self.settings.lease_s, max_attempts=self.settings.max_attempts
            )
            if job is None:
                break
            running[job.audit_id] = asyncio.create_task(self._run(job), name=f"audit-{job.audit_id}")
        now = loop.time()
        if now - last_renew >= renew_every:
            # Leases move on this cadence, so expired ones need no closer look than this either.
            last_renew = now
            await asyncio.to_thread(self.store.requeue_expired)
            lost = await asyncio.to_thread(self.store.renew, self.name, list(running), self.settings.lease_s)
        else:
            lost = await asyncio.to_thread(self.store.lost, self.name, list(running))
        for audit_id in lost:
            self._stop_now(audit_id)
        self._last_progress = time.monotonic()
        if self.state == "store-unavailable":
            self._recovered()
        return last_renew

    async def _wait_for_work(self, stop: asyncio.Event, renew_every: float) -> None:
        running = self.running
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop.wait()), *running.values()}
        await asyncio.wait(waiters, timeout=min(self.settings.poll_s, renew_every), return_when=asyncio.FIRST_COMPLETED)
        for future in waiters - set(running.values()):
            future.cancel()
        for audit_id, task in list(running.items()):
            if task.done():
                del running[audit_id]
                if not task.cancelled() and task.exception() is not None:
                    # The audit's lease runs out and another pass takes it (its attempt counted at the claim).
                    log.error("audit %s: worker error", audit_id, exc_info=task.exception())

    def stop_audit(self, audit_id: int) -> None:
        """Stop running `audit_id` now (it was cancelled or taken over); no further model call is made for it.
        Safe from any thread (the API's routes run in a thread pool)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop_now, audit_id)

    def _stop_now(self, audit_id: int) -> None:
        task = self.running.get(audit_id)
        if task is not None and not task.done():
            log.info("audit %s: no longer ours (cancelled or taken over); stopping it", audit_id)
            task.cancel()

    def _trouble(self, state: WorkerState, message: str) -> None:
        message = self.settings.redact(message)
        if (state, message) != (self.state, self.last_error):
            log.error("worker %s: %s; retrying with backoff", self.name, message)
        if state != self.state:
            self._trouble_since = time.monotonic()
        self.state, self.last_error = state, message

    def _recovered(self) -> None:
        if self.state in ("store-unavailable", "endpoint-down"):
            log.warning("worker %s: back to work (%s is over)", self.name, self.state)
        self.state = "running"
        self._trouble_since = None

    async def _release(self, running: dict[int, asyncio.Task[None]]) -> None:
        for task in running.values():
            task.cancel()
        # Their outcomes are the cancellation just asked for; each audit goes back to the queue below.
        await asyncio.gather(*running.values(), return_exceptions=True)
        if running:
            # Handed back at once rather than after the lease: a stopped worker's audits are redone by the next one.
            try:
                await asyncio.shield(asyncio.to_thread(self.store.release, self.name, list(running)))
            except (SQLAlchemyError, OSError) as exc:
                log.warning("could not hand back audits %s (%s); their leases will run out", list(running), exc)

    async def _run(self, job: Job) -> None:
        request: AuditRequest = job.request
        assert self._overrides is not None
        try:
            async with self._overrides.lease(request.overrides) as verifier:
                item = work_item(request)
                report = await verifier.verify(
                    TaskInput(
                        request.response,
                        question=request.question,
                        reference=item.evidence(),
                        reference_source=f"audit {job.audit_id}: reference",
                        claims=item.claim_texts(),
                        id=f"audit-{job.audit_id}",
                    ),
                    task=request.task,
                )
        except InputError as exc:
            await self._store(self.store.fail, job.audit_id, self.name, f"input: {exc}")
            return
        except ModelRequestError as exc:
            if exc.fatal:
                log.error("audit %s: the endpoint refuses requests (%s); the audit waits", job.audit_id, exc)
            await self._endpoint_failed(job, f"{exc.kind}: {exc}", fatal=exc.fatal)
            return
        except DebateError as exc:
            if exc.transient:
                await self._endpoint_failed(job, f"{exc.kind}: {exc}", fatal=False)
            else:
                await self._store(self.store.fail, job.audit_id, self.name, self.settings.redact(f"{exc.kind}: {exc}"))
            return
        except ValidationError as exc:
            # A per-audit configuration the Verifier refuses (e.g. min_rounds above max_rounds): the item's fault.
            await self._store(self.store.fail, job.audit_id, self.name, f"configuration: {exc}")
            return
        transient = transient_failure(report)
        if transient is not None:
            await self._endpoint_failed(job, f"a transient failure left claims unverifiable ({transient.message})")
            return
        self._failures_in_a_row, self._breaker_until = 0, 0.0
        if self.state == "endpoint-down":
            self._recovered()
        try:
            stored = await self._store(self.store.finish, job.audit_id, self.name, report)
        except SQLAlchemyError as exc:
            # The store refuses this result (e.g. PostgreSQL and a NUL in a model's reply): an attempt spent.
            await self._defer(job, f"the result could not be stored: {store_cause(exc)}", keep_attempt=False)
            return
        if not stored:
            log.info("audit %s: result discarded (cancelled or taken over meanwhile)", job.audit_id)

    async def _endpoint_failed(self, job: Job, reason: str, *, fatal: bool = False) -> None:
        """A transient (or refused) model call: count it toward the breaker. While the breaker is open the endpoint
        is known to be down, so the audit goes back without spending an attempt on it."""
        was_open = self._breaker_until > 0
        self._failures_in_a_row += 1
        if fatal or self._failures_in_a_row >= self.settings.breaker_failures:
            loop = asyncio.get_running_loop()
            pause = min(self.settings.breaker_max_s, 5.0 * 2 ** max(0, self._failures_in_a_row - 3))
            self._breaker_until = loop.time() + pause
            self._trouble("endpoint-down", f"the model endpoint is failing ({reason}); next try in {pause:.1f} s")
        await self._defer(job, reason, keep_attempt=was_open, fatal=fatal)

    async def _defer(self, job: Job, reason: str, *, keep_attempt: bool, fatal: bool = False) -> None:
        reason = self.settings.redact(reason)
        delay = 60.0 if fatal else min(60.0, 2.0**job.attempts)
        status = await self._store(
            self.store.defer,
            job.audit_id,
            self.name,
            reason,
            delay_s=delay,
            max_attempts=self.settings.max_attempts,
            keep_attempt=keep_attempt,
        )
        log.warning("audit %s: %s (%s)", job.audit_id, reason, status)

    async def _store(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A store write for a running audit, retried with backoff while the store is unreachable (a restart, a
        full disk), for at most half a lease: the result of work already done is not thrown away for a blip. A
        write the store refuses (DataError, IntegrityError) is not retried."""

        def waiting(state: RetryCallState) -> None:
            if state.outcome is not None and (exc := state.outcome.exception()) is not None:
                self._trouble("store-unavailable", f"the audit store fails: {store_cause(exc)}")

        retrying = AsyncRetrying(
            retry=retry_if_exception(store_away),
            wait=wait_random_exponential(multiplier=0.2, max=5.0),
            stop=stop_after_delay(self.settings.lease_s / 2),
            before_sleep=waiting,
            reraise=True,
        )
        return await retrying(asyncio.to_thread, call, *args, **kwargs)


class _Backoff:
    """Exponential backoff with full jitter between `first` and `cap` seconds."""

    def __init__(self, first: float, cap: float) -> None:
        self.first, self.cap, self.tries = first, cap, 0

    def next(self) -> float:
        self.tries += 1
        return random.uniform(self.first, min(self.cap, self.first * 2**self.tries))

    def reset(self) -> None:
        self.tries = 0


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, or less when the worker is asked to stop."""
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([stopping], timeout=seconds)
    stopping.cancel()
