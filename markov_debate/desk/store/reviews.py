"""Human reviews: appending one, and the queue of claims waiting for a human (with each claim's evidence and
deciding opinion from its stored report)."""

from __future__ import annotations

import json
from typing import Literal

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from debate.types import Report
from markov_debate.desk.auth import Principal
from markov_debate.desk.models import (
    QueueItem,
    ReviewIn,
    ReviewInfo,
)
from markov_debate.desk.store.audits import AuditStore, review_info
from markov_debate.desk.store.db import ConflictError, NotFoundError, ReviewConflictError, StoreError, utcnow
from markov_debate.desk.store.queueing import QueueName, sample_window
from markov_debate.desk.tables import AuditRow, ClaimRow, EventRow, ReviewRow
from markov_debate.desk.views import reviewed_verdict

__all__ = ["ReviewStore"]


class ReviewStore(AuditStore):
    """Reviews and the review queue."""

    # --- reviews ---------------------------------------------------------------------------------------------

    def add_review(self, audit_id: int, claim_id: str, principal: Principal, review: ReviewIn) -> ReviewInfo:
        """Record a review of a finished audit's claim (appended; the report is untouched)."""
        with self._session.begin() as s:
            # The row lock (PostgreSQL; SQLite's writes are serial anyway) makes the stale-view check and the insert
            # one step against a colleague reviewing the same claim.
            claim = s.get(ClaimRow, (audit_id, claim_id), with_for_update=True)
            if claim is None:
                if s.get(AuditRow, audit_id) is None:
                    raise NotFoundError(f"no audit {audit_id}")
                raise NotFoundError(f"audit {audit_id} has no claim {claim_id!r} (or is not finished)")
            engine = claim.engine_label
            _check_fresh(s, claim, review.seen_label)
            if review.decision == "confirm":
                if engine == "unverifiable":
                    raise ConflictError("the engine gave no label (unverifiable): overturn it with the right label")
                if review.label is not None and review.label != engine:
                    raise ConflictError(f"confirm keeps the engine's label {engine}; to change it, overturn")
                label = engine
            else:
                if review.label is None:
                    raise StoreError("overturn needs the right label")
                if review.label == engine:
                    raise ConflictError(f"the engine already said {engine}: confirm instead")
                label = review.label
            row = ReviewRow(
                audit_id=audit_id,
                claim_id=claim_id,
                reviewer=principal.name,
                created_at=utcnow(),
                decision=review.decision,
                label=label,
                engine_label=engine,
                decided_by=claim.decided_by,
                note=review.note,
            )
            s.add(row)
            claim.queue = None
            s.flush()
            _standing_verdict(s, audit_id)
            s.add(
                EventRow(
                    audit_id=audit_id,
                    at=row.created_at,
                    kind="reviewed",
                    actor=principal.name,
                    detail=f"{claim_id}: {review.decision} ({engine} -> {label})",
                )
            )
            return review_info(row)

    def review_queue(self, *, limit: int = 50, sample_rate: float = 0.1, seed: int = 0) -> list[QueueItem]:
        """Unreviewed claims: those the engine did not find factual first (oldest audit first), then a seeded
        sample of its confident factual decisions (prefilter decisions included) for re-checking. Two reads of the
        claims' queue index, each stopping at `limit`: the cost follows `limit`, not the store's size."""
        with self._read() as s:
            rows = self._waiting(s, "needs-review", limit)
            windows = sample_window(seed, sample_rate)
            if len(rows) < limit and windows:
                drawn = or_(*(and_(ClaimRow.draw >= lo, ClaimRow.draw < hi) for lo, hi in windows))
                rows += self._waiting(s, "spot-check", limit - len(rows), drawn)
        return [_queue_item(c, t) for c, t in rows]

    @staticmethod
    def _waiting(s: Session, queue: QueueName, limit: int, *where: ColumnElement[bool]) -> list[tuple[ClaimRow, str]]:
        query = (
            select(ClaimRow, AuditRow.task)
            .join(AuditRow, AuditRow.id == ClaimRow.audit_id)
            .where(ClaimRow.queue == queue, *where)
            .order_by(ClaimRow.queue, ClaimRow.audit_id, ClaimRow.position)
            .limit(limit)
        )
        return [(claim, task) for claim, task in s.execute(query).all()]


def _queue_item(claim: ClaimRow, task: str) -> QueueItem:
    """The claim with its evidence and deciding opinion (kept with it at finish), so a review needs no second
    page."""
    reason: Literal["needs-review", "spot-check"] = "spot-check" if claim.queue == "spot-check" else "needs-review"
    context = json.loads(claim.context) if claim.context else {}
    return QueueItem(
        audit_id=claim.audit_id,
        claim_id=claim.claim_id,
        reason=reason,
        text=claim.text,
        engine_label=claim.engine_label,
        decided_by=claim.decided_by,
        error_severity=claim.error_severity,
        task=task,
        evidence=context.get("evidence", []),
        final_opinion=context.get("final_opinion"),
    )


def _check_fresh(s: Session, claim: ClaimRow, seen: str | None) -> None:
    """Refuse a review made on a view older than the claim's current label."""
    if seen is None:
        return
    last = s.scalars(
        select(ReviewRow)
        .where(ReviewRow.audit_id == claim.audit_id, ReviewRow.claim_id == claim.claim_id)
        .order_by(ReviewRow.id.desc())
        .limit(1)
    ).first()
    current = last.label if last is not None else claim.engine_label
    if seen == current:
        return
    by = f"{last.reviewer}'s {last.decision} at {last.created_at:%Y-%m-%d %H:%M} UTC" if last else "the engine"
    raise ReviewConflictError(
        f"not saved: the label of claim {claim.claim_id} changed while you were reviewing it (you saw "
        f"{seen.replace('_', ' ')}; it is now {current.replace('_', ' ')}, by {by}). Look at it again and review anew.",
        audit_id=claim.audit_id,
        claim_id=claim.claim_id,
        current_label=current,
        reviewed_by=last.reviewer if last else "engine",
    )


def _standing_verdict(s: Session, audit_id: int) -> None:
    """Keep the audit's verdict as reviewed (lists, filters and counts read it): the report's rollup over the
    claims with each one's latest review."""
    audit = s.get(AuditRow, audit_id)
    if audit is None or audit.report_json is None:
        return
    reviews = s.scalars(select(ReviewRow).where(ReviewRow.audit_id == audit_id).order_by(ReviewRow.id))
    latest = {r.claim_id: review_info(r) for r in reviews}
    audit.reviewed_verdict = reviewed_verdict(Report.model_validate_json(audit.report_json), latest)
