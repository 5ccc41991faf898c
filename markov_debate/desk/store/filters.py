"""The audit list's filters as SQL conditions (the API's and the page's, one place)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, exists, func

from markov_debate.desk.tables import AuditRow, GuardDecisionRow, ReviewRow

__all__ = ["AuditFilters"]


@dataclass(frozen=True)
class AuditFilters:
    """Which audits a listing shows; None (or empty) leaves a field out."""

    verdict: str | None = None
    """The verdict as it now stands (a reviewer's overturn leads)."""
    task: str | None = None
    status: str | None = None
    reviewed: bool | None = None
    q: str | None = None
    """Text the audit contains (case-insensitive)."""
    since: datetime | None = None
    """Created at or after (naive: UTC)."""
    batch_id: int | None = None
    owner: str | None = None
    """Only those this principal submitted."""
    guard_action: str | None = None
    """Only answers `debate guard` dealt with so (blocked, flagged, ...)."""

    def conditions(self) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = []
        if self.owner is not None:
            found.append(AuditRow.submitted_by == self.owner)
        if self.verdict:
            found.append(func.coalesce(AuditRow.reviewed_verdict, AuditRow.verdict) == self.verdict)
        if self.task:
            found.append(AuditRow.task == self.task)
        if self.status:
            found.append(AuditRow.status == self.status)
        if self.since is not None:
            since = self.since.astimezone(UTC).replace(tzinfo=None) if self.since.tzinfo else self.since
            found.append(AuditRow.created_at >= since)
        if self.q:
            found.append(AuditRow.search_text.contains(self.q.lower(), autoescape=True))
        if self.batch_id is not None:
            found.append(AuditRow.batch_id == self.batch_id)
        if self.reviewed is not None:
            has_review = exists().where(ReviewRow.audit_id == AuditRow.id)
            found.append(has_review if self.reviewed else ~has_review)
        if self.guard_action:
            decided = exists().where(GuardDecisionRow.audit_id == AuditRow.id)
            found.append(decided.where(GuardDecisionRow.action == self.guard_action))
        return found
