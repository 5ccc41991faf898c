"""Human reviews: appending one, and the queue of claims waiting for a human (with each claim's evidence and
deciding opinion from its stored report)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import and_, exists, or_, select, tuple_
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

__all__ = ["Ask", "QueueOrder", "ReviewStore"]

QueueOrder = Literal["oldest", "p_factual", "label-next"]
"""The review queue's order: within each part oldest audit first, or least likely factual first; or the claims the
calibration's fit asks labels for first (its label-next order), then the rest oldest first."""
Ask = tuple[int, str, str]
"""A claim the calibration asks a label for: audit id, claim id, why."""


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

    def review_queue(
        self,
        *,
        limit: int = 50,
        sample_rate: float = 0.1,
        seed: int = 0,
        order: QueueOrder = "oldest",
        asks: Sequence[Ask] = (),
    ) -> list[QueueItem]:
        """Unreviewed claims: those the engine did not find factual first, then a seeded sample of its confident
        factual decisions (prefilter decisions included) for re-checking; within each, oldest audit first, or with
        `order` "p_factual" least likely factual first (claims without one last). Two reads of a queue index, each
        stopping at `limit`: the cost follows `limit`, not the store's size. With `order` "label-next", the
        unreviewed claims of `asks` come first, in its order, then the rest oldest first."""
        with self._read() as s:
            asked = self._asked(s, asks, limit) if order == "label-next" else []
            within: QueueOrder = "oldest" if order == "label-next" else order
            rows = self._waiting(s, "needs-review", limit, within)
            windows = sample_window(seed, sample_rate)
            if len(rows) < limit and windows:
                drawn = or_(*(and_(ClaimRow.draw >= lo, ClaimRow.draw < hi) for lo, hi in windows))
                rows += self._waiting(s, "spot-check", limit - len(rows), within, drawn)
        listed = {(q.audit_id, q.claim_id) for q in asked}
        rest = [_queue_item(c, t) for c, t in rows if (c.audit_id, c.claim_id) not in listed]
        return (asked + rest)[:limit]

    @staticmethod
    def _asked(s: Session, asks: Sequence[Ask], limit: int) -> list[QueueItem]:
        """The claims of `asks` on this desk that no one has reviewed, in its order, at most `limit`."""
        if not asks:
            return []
        reviewed = exists().where(ReviewRow.audit_id == ClaimRow.audit_id, ReviewRow.claim_id == ClaimRow.claim_id)
        query = (
            select(ClaimRow, AuditRow.task)
            .join(AuditRow, AuditRow.id == ClaimRow.audit_id)
            .where(tuple_(ClaimRow.audit_id, ClaimRow.claim_id).in_([(a, c) for a, c, _ in asks]), ~reviewed)
        )
        found = {(c.audit_id, c.claim_id): (c, t) for c, t in s.execute(query).all()}
        out = [
            _queue_item(*found[(a, c)]).model_copy(update={"reason": "label-next", "why": why})
            for a, c, why in asks
            if (a, c) in found
        ]
        return out[:limit]

    @classmethod
    def _waiting(
        cls, s: Session, queue: QueueName, limit: int, order: QueueOrder, *where: ColumnElement[bool]
    ) -> list[tuple[ClaimRow, str]]:
        if order == "oldest":
            return cls._read_queue(s, queue, limit, (ClaimRow.audit_id, ClaimRow.position), *where)
        # claims with a probability, then those without: two reads that each follow ix_claims_queue_p's order (one
        # ORDER BY "p IS NULL" would sort every waiting claim, and the databases put NULLs at opposite ends)
        ranked = (ClaimRow.p_factual, ClaimRow.audit_id, ClaimRow.position)
        rows = cls._read_queue(s, queue, limit, ranked, ClaimRow.p_factual.is_not(None), *where)
        if len(rows) < limit:
            rest = (ClaimRow.audit_id, ClaimRow.position)
            rows += cls._read_queue(s, queue, limit - len(rows), rest, ClaimRow.p_factual.is_(None), *where)
        return rows

    @staticmethod
    def _read_queue(
        s: Session, queue: QueueName, limit: int, order: tuple[Any, ...], *where: ColumnElement[bool]
    ) -> list[tuple[ClaimRow, str]]:
        query = (
            select(ClaimRow, AuditRow.task)
            .join(AuditRow, AuditRow.id == ClaimRow.audit_id)
            .where(ClaimRow.queue == queue, *where)
            .order_by(ClaimRow.queue, *order)
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
        p_factual=claim.p_factual,
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
