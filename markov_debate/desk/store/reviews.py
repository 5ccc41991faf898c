"""Human reviews: appending one, and the queue of claims waiting for a human (with each claim's evidence and
deciding opinion from its stored report)."""

from __future__ import annotations

import random
from typing import Literal

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from debate.types import Report
from markov_debate.desk.auth import Principal
from markov_debate.desk.models import (
    QueueItem,
    ReviewIn,
    ReviewInfo,
)
from markov_debate.desk.store.audits import AuditStore, review_info
from markov_debate.desk.store.db import NotFoundError, StoreError, utcnow
from markov_debate.desk.tables import AuditRow, ClaimRow, EventRow, ReviewRow
from markov_debate.desk.views import reviewed_verdict

__all__ = ["ReviewStore"]


class ReviewStore(AuditStore):
    """Reviews and the review queue."""

    # --- reviews ---------------------------------------------------------------------------------------------

    def add_review(self, audit_id: int, claim_id: str, principal: Principal, review: ReviewIn) -> ReviewInfo:
        """Record a review of a finished audit's claim (appended; the report is untouched)."""
        with self._session.begin() as s:
            claim = s.get(ClaimRow, (audit_id, claim_id))
            if claim is None:
                if s.get(AuditRow, audit_id) is None:
                    raise NotFoundError(f"no audit {audit_id}")
                raise NotFoundError(f"audit {audit_id} has no claim {claim_id!r} (or is not finished)")
            engine = claim.engine_label
            if review.decision == "confirm":
                if engine == "unverifiable":
                    raise StoreError("the engine gave no label (unverifiable): overturn it with the right label")
                if review.label is not None and review.label != engine:
                    raise StoreError(f"confirm keeps the engine's label {engine}; to change it, overturn")
                label = engine
            else:
                if review.label is None:
                    raise StoreError("overturn needs the right label")
                if review.label == engine:
                    raise StoreError(f"the engine already said {engine}: confirm instead")
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
        sample of its confident factual decisions (prefilter decisions included) for re-checking."""
        reviewed = exists().where(ReviewRow.audit_id == ClaimRow.audit_id, ReviewRow.claim_id == ClaimRow.claim_id)
        with self._session() as s:
            rows = s.execute(
                select(ClaimRow, AuditRow.task)
                .join(AuditRow, AuditRow.id == ClaimRow.audit_id)
                .where(AuditRow.status == "done", ~reviewed)
                .order_by(ClaimRow.audit_id, ClaimRow.position)
            ).all()
        needs = [(c, t) for c, t in rows if c.engine_label != "factual"]
        spot = [(c, t) for c, t in rows if c.engine_label == "factual" and _sampled(seed, c, sample_rate)]
        items = [_queue_item(c, t, "needs-review") for c, t in needs] + [
            _queue_item(c, t, "spot-check") for c, t in spot
        ]
        return self._with_context(items[:limit])

    def _with_context(self, items: list[QueueItem]) -> list[QueueItem]:
        """Each item with its claim's evidence and deciding opinion, read from the stored reports, so a review
        needs no second page."""
        ids = {item.audit_id for item in items}
        with self._session() as s:
            stored = dict(s.execute(select(AuditRow.id, AuditRow.report_json).where(AuditRow.id.in_(ids))).all())
        reports = {audit_id: Report.model_validate_json(text) for audit_id, text in stored.items() if text}
        out = []
        for item in items:
            report = reports.get(item.audit_id)
            claim = next((c for c in report.claims if c.claim_id == item.claim_id), None) if report else None
            if claim is None:
                out.append(item)
                continue
            opinion = claim.debate.final.opinion if claim.debate is not None and claim.debate.final else claim.reason
            out.append(item.model_copy(update={"evidence": claim.evidence, "final_opinion": opinion}))
        return out


def _queue_item(claim: ClaimRow, task: str, reason: Literal["needs-review", "spot-check"]) -> QueueItem:
    return QueueItem(
        audit_id=claim.audit_id,
        claim_id=claim.claim_id,
        reason=reason,
        text=claim.text,
        engine_label=claim.engine_label,
        decided_by=claim.decided_by,
        error_severity=claim.error_severity,
        task=task,
    )


def _sampled(seed: int, claim: ClaimRow, rate: float) -> bool:
    # Each claim's draw depends only on (seed, audit, claim): the sample does not shift as new audits arrive.
    return random.Random(f"{seed}:{claim.audit_id}:{claim.claim_id}").random() < rate


def _standing_verdict(s: Session, audit_id: int) -> None:
    """Keep the audit's verdict as reviewed (lists, filters and counts read it): the report's rollup over the
    claims with each one's latest review."""
    audit = s.get(AuditRow, audit_id)
    if audit is None or audit.report_json is None:
        return
    reviews = s.scalars(select(ReviewRow).where(ReviewRow.audit_id == audit_id).order_by(ReviewRow.id))
    latest = {r.claim_id: review_info(r) for r in reviews}
    audit.reviewed_verdict = reviewed_verdict(Report.model_validate_json(audit.report_json), latest)
