"""Everything that changes an audit's status or lease: claiming, renewing, finishing, deferring, failing,
releasing, cancelling, retrying, and the expired-lease sweep. The "finished at most once" protocol lives here:
every write is guarded by the status (and the worker) it expects, so a result is stored only by the worker that
still holds the audit, whatever crashed in between, and no audit is retried past `max_attempts` on any path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from debate.types import Report
from markov_debate.desk.auth import Principal
from markov_debate.desk.requests import load_request
from markov_debate.desk.store.audits import AuditStore, owned
from markov_debate.desk.store.costs import audit_cost
from markov_debate.desk.store.db import ConflictError, Job, count, engine_label, utcnow
from markov_debate.desk.store.queueing import claim_context, claim_draw, queue_of
from markov_debate.desk.tables import AuditRow, ClaimRow, EventRow

__all__ = ["JobStore", "claim_rows", "claim_values"]


class JobStore(AuditStore):
    """The job protocol over the audits table."""

    def queue_health(self) -> tuple[int, float | None, float | None]:
        """(pending audits that are due, seconds the oldest of them has waited, seconds since any worker last
        claimed, finished, deferred or failed an audit): what `/v1/health` judges progress by."""
        with self._read() as s:
            now = utcnow()
            due = (AuditRow.status == "pending", or_(AuditRow.not_before.is_(None), AuditRow.not_before <= now))
            count, oldest = s.execute(select(func.count(), func.min(AuditRow.created_at)).where(*due)).one()
            last = s.scalars(
                select(EventRow.at)
                .where(EventRow.kind.in_(("claimed", "finished", "deferred", "failed")))
                .order_by(EventRow.id.desc())
                .limit(1)
            ).first()
        return (
            int(count),
            None if oldest is None else (now - oldest).total_seconds(),
            None if last is None else (now - last).total_seconds(),
        )

    # --- jobs ------------------------------------------------------------------------------------------------

    def claim(self, worker: str, lease_s: float, *, max_attempts: int = 5) -> Job | None:
        """Take the oldest pending audit that is due, or None. An audit already tried `max_attempts` times (whatever
        brought it back: a deferral, a lost lease, a stopped worker, a result the store refused) and one whose
        stored request cannot be read are marked failed with the reason instead, and the next one is taken: no
        audit is retried forever and none can stop the queue."""
        for _ in range(50):
            with self._session.begin() as s:
                now = utcnow()
                candidate = (
                    select(AuditRow.id)
                    .where(AuditRow.status == "pending", or_(AuditRow.not_before.is_(None), AuditRow.not_before <= now))
                    .order_by(AuditRow.id)
                    .limit(1)
                )
                if self.dialect == "postgresql":
                    candidate = candidate.with_for_update(skip_locked=True)
                audit_id = s.scalars(candidate).first()
                if audit_id is None:
                    return None
                taken = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "pending")
                    .values(
                        status="running",
                        worker=worker,
                        lease_until=now + timedelta(seconds=lease_s),
                        started_at=now,
                        attempts=AuditRow.attempts + 1,
                    )
                )
                if count(taken) != 1:
                    continue  # another worker won the race: look again
                row = s.get_one(AuditRow, audit_id)
                if row.attempts > max_attempts:
                    self._quarantine(
                        s, row, worker, f"gave up after {row.attempts - 1} attempts: {row.error or 'no result'}"
                    )
                    continue
                try:
                    request = load_request(row.request_json)
                except ValidationError as exc:
                    self._quarantine(s, row, worker, f"the stored request cannot be read: {exc.errors()[0]['msg']}")
                    continue
                s.add(
                    EventRow(audit_id=audit_id, at=now, kind="claimed", actor=worker, detail=f"attempt {row.attempts}")
                )
                return Job(audit_id, request, row.attempts)
        return None

    @staticmethod
    def _quarantine(s: Session, row: AuditRow, worker: str, reason: str) -> None:
        now = utcnow()
        row.status, row.error, row.finished_at, row.worker, row.lease_until = "failed", reason, now, None, None
        s.add(EventRow(audit_id=row.id, at=now, kind="failed", actor=worker, detail=reason))

    def renew(self, worker: str, audit_ids: Sequence[int], lease_s: float) -> list[int]:
        """Extend the leases of a worker's running audits; the ids it no longer holds (cancelled or taken over)."""
        if not audit_ids:
            return []
        with self._session.begin() as s:
            s.execute(
                update(AuditRow)
                .where(AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running")
                .values(lease_until=utcnow() + timedelta(seconds=lease_s))
            )
            held = set(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running"
                    )
                )
            )
        return [i for i in audit_ids if i not in held]

    def lost(self, worker: str, audit_ids: Sequence[int]) -> list[int]:
        """The ids among `audit_ids` that `worker` no longer holds (cancelled, or taken over): a read, cheap enough
        for every pass of the worker's loop, so a cancel stops the work within one poll."""
        if not audit_ids:
            return []
        with self._session() as s:
            held = set(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running"
                    )
                )
            )
        return [i for i in audit_ids if i not in held]

    def requeue_expired(self) -> list[int]:
        """Put running audits whose lease ran out (their worker died) back in the queue."""
        with self._session.begin() as s:
            now = utcnow()
            expired = list(
                s.scalars(select(AuditRow.id).where(AuditRow.status == "running", AuditRow.lease_until < now))
            )
            for audit_id in expired:
                done = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.lease_until < now)
                    .values(status="pending", worker=None, lease_until=None)
                )
                if count(done) == 1:
                    s.add(
                        EventRow(
                            audit_id=audit_id, at=now, kind="requeued", actor=None, detail="the worker's lease ran out"
                        )
                    )
            return expired

    def release(self, worker: str, audit_ids: Sequence[int]) -> None:
        """A stopping worker hands its running audits back to the queue."""
        with self._session.begin() as s:
            now = utcnow()
            for audit_id in audit_ids:
                done = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.worker == worker)
                    .values(status="pending", worker=None, lease_until=None)
                )
                if count(done) == 1:
                    s.add(EventRow(audit_id=audit_id, at=now, kind="requeued", actor=worker, detail="worker stopped"))

    def finish(self, audit_id: int, worker: str, report: Report) -> bool:
        """Store the report, as produced, if `worker` still holds the audit; False when it does not (discarded)."""
        report_json = report.model_dump_json()
        data = json.loads(report_json)
        with self._session.begin() as s:
            now = utcnow()
            stored = s.execute(
                update(AuditRow)
                .where(
                    AuditRow.id == audit_id,
                    AuditRow.status == "running",
                    AuditRow.worker == worker,
                    AuditRow.report_json.is_(None),
                )
                .values(
                    status="done",
                    finished_at=now,
                    lease_until=None,
                    error=None,
                    verdict=report.verdict,
                    report_json=report_json,
                    llm_calls=report.usage.llm_calls,
                    prompt_tokens=report.usage.prompt_tokens,
                    completion_tokens=report.usage.completion_tokens,
                    cost_usd=audit_cost(report, self._prices),
                )
            )
            if count(stored) != 1:
                s.add(
                    EventRow(
                        audit_id=audit_id,
                        at=now,
                        kind="discarded",
                        actor=worker,
                        detail="the result came after the audit was cancelled or taken over",
                    )
                )
                return False
            s.add_all(claim_rows(audit_id, data))
            s.add(EventRow(audit_id=audit_id, at=now, kind="finished", actor=worker, detail=report.verdict))
            return True

    def defer(
        self, audit_id: int, worker: str, reason: str, *, delay_s: float, max_attempts: int, keep_attempt: bool = False
    ) -> str:
        """A transient failure: back to the queue after `delay_s`, or failed after `max_attempts`. The new status.
        `keep_attempt`: the failure was not the audit's (the endpoint is known to be down), so this attempt is not
        counted."""
        with self._session.begin() as s:
            now = utcnow()
            row = s.get(AuditRow, audit_id)
            if row is None or row.status != "running" or row.worker != worker:
                return row.status if row is not None else "missing"
            if keep_attempt:
                row.attempts -= 1
            if not keep_attempt and row.attempts >= max_attempts:
                row.status, row.error, row.finished_at = (
                    "failed",
                    f"gave up after {row.attempts} attempts: {reason}",
                    now,
                )
                row.worker = row.lease_until = None
                s.add(EventRow(audit_id=audit_id, at=now, kind="failed", actor=worker, detail=row.error))
            else:
                row.status, row.worker, row.lease_until, row.error = "pending", None, None, reason
                row.not_before = now + timedelta(seconds=delay_s)
                s.add(EventRow(audit_id=audit_id, at=now, kind="deferred", actor=worker, detail=reason))
            return row.status

    def fail(self, audit_id: int, worker: str, message: str) -> bool:
        """A permanent failure (the item itself is unusable): recorded as the audit's outcome."""
        with self._session.begin() as s:
            now = utcnow()
            done = s.execute(
                update(AuditRow)
                .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.worker == worker)
                .values(status="failed", error=message, finished_at=now, lease_until=None)
            )
            if count(done) == 1:
                s.add(EventRow(audit_id=audit_id, at=now, kind="failed", actor=worker, detail=message))
            return count(done) == 1

    def cancel(self, audit_id: int, principal: Principal) -> str:
        """Cancel a pending or running audit (a submitter its own only); its status afterwards."""
        with self._session.begin() as s:
            row = owned(s.get(AuditRow, audit_id), audit_id, principal.owner)
            if row.status in ("pending", "running"):
                row.status, row.worker, row.lease_until, row.finished_at = "cancelled", None, None, utcnow()
                s.add(EventRow(audit_id=audit_id, at=utcnow(), kind="cancelled", actor=principal.name, detail=None))
            return row.status

    def retry(self, audit_id: int, principal: Principal) -> str:
        """Bring a failed or cancelled audit (a submitter's own only) back to the queue with its attempts reset
        (after an outage, a fixed endpoint, a cancel regretted); its status afterwards. ConflictError for any
        other status."""
        with self._session.begin() as s:
            row = owned(s.get(AuditRow, audit_id), audit_id, principal.owner)
            if row.status not in ("failed", "cancelled"):
                raise ConflictError(
                    f"audit {audit_id} is {row.status}; only a failed or cancelled audit can be retried"
                )
            self._requeue_failed(s, row, principal.name)
            return row.status

    def retry_failed(self, principal: Principal, *, batch_id: int | None = None) -> int:
        """Bring every failed audit (of one batch, or all; a submitter's own only) back to the queue; how many."""
        if batch_id is not None:
            self.batch(batch_id, owner=principal.owner)
        with self._session.begin() as s:
            query = select(AuditRow).where(AuditRow.status == "failed")
            if principal.owner is not None:
                query = query.where(AuditRow.submitted_by == principal.owner)
            if batch_id is not None:
                query = query.where(AuditRow.batch_id == batch_id)
            rows = list(s.scalars(query))
            for row in rows:
                self._requeue_failed(s, row, principal.name)
            return len(rows)

    def cancel_batch(self, batch_id: int, principal: Principal) -> int:
        """Cancel a batch's unfinished audits (a submitter its own batch only); how many."""
        self.batch(batch_id, owner=principal.owner)
        with self._session.begin() as s:
            ids = list(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.batch_id == batch_id, AuditRow.status.in_(("pending", "running"))
                    )
                )
            )
            now = utcnow()
            for audit_id in ids:
                s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status.in_(("pending", "running")))
                    .values(status="cancelled", worker=None, lease_until=None, finished_at=now)
                )
                s.add(
                    EventRow(
                        audit_id=audit_id, at=now, kind="cancelled", actor=principal.name, detail=f"batch {batch_id}"
                    )
                )
            return len(ids)


def claim_rows(audit_id: int, report: dict[str, Any]) -> list[ClaimRow]:
    """The claim rows a finished report indexes (the review queue, filters and stats read them)."""
    return [ClaimRow(**values) for values in claim_values(audit_id, report)]


def claim_values(audit_id: int, report: dict[str, Any]) -> list[dict[str, Any]]:
    """`claim_rows` as column values, for an insert of many rows at once."""
    return [
        {
            "audit_id": audit_id,
            "claim_id": claim["claim_id"],
            "position": position,
            "text": claim["text"],
            "engine_label": engine_label(claim),
            "decided_by": claim.get("decided_by") or "debate",
            "error_severity": claim.get("error_severity"),
            "queue": queue_of(engine_label(claim)),
            "draw": claim_draw(audit_id, claim["claim_id"]),
            "context": claim_context(claim),
            "p_factual": claim.get("p_factual"),
        }
        for position, claim in enumerate(report["claims"])
    ]
