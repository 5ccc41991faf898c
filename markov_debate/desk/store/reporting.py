"""What reports are made of: the counts the desk's statistics use, and the finished audits an export pages
through."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select

from markov_debate.desk.store.db import utcnow
from markov_debate.desk.store.sessions import SessionStore
from markov_debate.desk.tables import AuditRow, ClaimRow, EventRow, ReviewRow

__all__ = ["DeferralRun", "ReportingStore", "StoreFigures"]


@dataclass(frozen=True)
class DeferralRun:
    """Audits being deferred with none finishing: how a server without its own worker (`--jobs 0`) sees an
    endpoint outage that its separate workers live through."""

    for_s: float
    """Seconds since the first deferral after the last finished audit."""
    last_s: float
    """Seconds since the latest deferral."""
    reason: str | None
    """The latest deferral's reason (may name hosts: for admins)."""


@dataclass(frozen=True)
class StoreFigures:
    """What `markov_debate.desk.stats` computes its statistics from."""

    by_status: dict[str, int]
    by_verdict: dict[str, int]
    by_task: dict[str, int]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    reviews: list[tuple[datetime, str, str, int, str]]
    flat_priced: int = 0
    """Audits priced at the desk's one price (finished before each model's own was kept, or a model without one)."""


class ReportingStore(SessionStore):
    """Aggregates over the store and the export's stream."""

    def deferral_run(self) -> DeferralRun | None:
        """Deferrals since the last finished audit, if any. Reads the events after the last finish only (by the
        primary key), so its cost follows the outage, not the store."""
        with self._read() as s:
            now = utcnow()
            finished = s.scalar(select(func.max(EventRow.id)).where(EventRow.kind == "finished")) or 0
            since = select(EventRow).where(EventRow.kind == "deferred", EventRow.id > finished)
            first = s.scalars(since.order_by(EventRow.id).limit(1)).first()
            if first is None:
                return None
            last = s.scalars(since.order_by(EventRow.id.desc()).limit(1)).first() or first
            return DeferralRun(
                for_s=(now - first.at).total_seconds(), last_s=(now - last.at).total_seconds(), reason=last.detail
            )

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self._prices[0] + completion_tokens * self._prices[1]) / 1e6

    def by_status(self) -> dict[str, int]:
        """Audits by status (what /metrics reports as waiting, running, done...)."""
        with self._read() as s:
            rows = s.execute(select(AuditRow.status, func.count()).group_by(AuditRow.status)).all()
            return {str(status): int(count) for status, count in rows}

    def figures(self, *, owner: str | None = None) -> StoreFigures:
        """The counts statistics are made of: audits by status, verdict and task, usage, and every review's
        (time, engine label, human label, audit, claim), oldest first. `owner`: of that submitter's audits only
        (a submitter's dashboard counts its own work, not everyone's)."""
        mine = [AuditRow.submitted_by == owner] if owner is not None else []
        with self._read() as s:
            by_status = dict(
                s.execute(select(AuditRow.status, func.count()).where(*mine).group_by(AuditRow.status)).all()
            )
            standing = func.coalesce(AuditRow.reviewed_verdict, AuditRow.verdict)  # as reviewed, where reviewed
            done = select(standing, func.count()).where(AuditRow.status == "done", *mine)
            by_verdict = dict(s.execute(done.group_by(standing)).all())
            by_task = dict(s.execute(select(AuditRow.task, func.count()).where(*mine).group_by(AuditRow.task)).all())
            calls, prompt, completion = s.execute(
                select(
                    func.coalesce(func.sum(AuditRow.llm_calls), 0),
                    func.coalesce(func.sum(AuditRow.prompt_tokens), 0),
                    func.coalesce(func.sum(AuditRow.completion_tokens), 0),
                ).where(*mine)
            ).one()
            # Each audit at its models' own prices where it kept that cost; the rest at the desk's one price.
            per_model, flat_prompt, flat_completion, flat = s.execute(
                select(
                    func.coalesce(func.sum(AuditRow.cost_usd), 0.0),
                    func.coalesce(func.sum(case((AuditRow.cost_usd.is_(None), AuditRow.prompt_tokens), else_=0)), 0),
                    func.coalesce(
                        func.sum(case((AuditRow.cost_usd.is_(None), AuditRow.completion_tokens), else_=0)), 0
                    ),
                    func.count(AuditRow.id).filter(AuditRow.cost_usd.is_(None), AuditRow.llm_calls > 0),
                ).where(*mine)
            ).one()
            review_rows = select(
                ReviewRow.created_at, ReviewRow.engine_label, ReviewRow.label, ReviewRow.audit_id, ReviewRow.claim_id
            )
            if owner is not None:
                review_rows = review_rows.join(AuditRow, AuditRow.id == ReviewRow.audit_id).where(*mine)
            reviews = list(s.execute(review_rows.order_by(ReviewRow.id)))
        return StoreFigures(
            by_status=by_status,
            by_verdict={str(k): v for k, v in by_verdict.items()},
            by_task=by_task,
            calls=int(calls),
            prompt_tokens=int(prompt),
            completion_tokens=int(completion),
            cost=float(per_model) + self._cost(int(flat_prompt), int(flat_completion)),
            flat_priced=int(flat),
            reviews=[(r[0], r[1], r[2], r[3], r[4]) for r in reviews],
        )

    def reviewed_probabilities(self, *, owner: str | None = None) -> list[tuple[float, str, datetime]]:
        """(p_factual, the latest review's label, when it was given) of each reviewed claim that has a p_factual
        (`owner`: of that submitter's audits only)."""
        query = (
            select(ClaimRow.audit_id, ClaimRow.claim_id, ClaimRow.p_factual, ReviewRow.label, ReviewRow.created_at)
            .join(ReviewRow, (ReviewRow.audit_id == ClaimRow.audit_id) & (ReviewRow.claim_id == ClaimRow.claim_id))
            .where(ClaimRow.p_factual.is_not(None))
            .order_by(ReviewRow.id)
        )
        if owner is not None:
            query = query.join(AuditRow, AuditRow.id == ClaimRow.audit_id).where(AuditRow.submitted_by == owner)
        with self._session() as s:
            rows = s.execute(query).all()
        latest: dict[tuple[int, str], tuple[float, str, datetime]] = {}
        for audit, claim, p, label, at in rows:  # in review order: a later review replaces an earlier one
            if p is not None:  # the query keeps only claims with one
                latest[(audit, claim)] = (float(p), str(label), at)
        return list(latest.values())

    def export_rows(self) -> Iterator[tuple[AuditRow, list[ReviewRow]]]:
        """Finished audits in id order, with their reviews (streamed in pages)."""
        last = 0
        while True:
            with self._session() as s:
                rows = list(
                    s.scalars(
                        select(AuditRow)
                        .where(AuditRow.status == "done", AuditRow.id > last)
                        .order_by(AuditRow.id)
                        .limit(200)
                    )
                )
                if not rows:
                    return
                reviews: dict[int, list[ReviewRow]] = {}
                for review in s.scalars(
                    select(ReviewRow).where(ReviewRow.audit_id.in_([r.id for r in rows])).order_by(ReviewRow.id)
                ):
                    reviews.setdefault(review.audit_id, []).append(review)
            for row in rows:
                yield row, reviews.get(row.id, [])
            last = rows[-1].id
