"""The audit store's tables (SQLAlchemy 2). The schema is created and changed only by the Alembic migrations in
markov_debate/desk/migrations; this module is what the code and `alembic revision --autogenerate` compare against."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["AuditRow", "Base", "BatchRow", "ClaimRow", "EventRow", "GuardDecisionRow", "ReviewRow"]


class Base(DeclarativeBase):
    pass


class BatchRow(Base):
    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("submitted_by", "idempotency_key", name="uq_batches_idempotency"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    submitted_by: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(500))
    task: Mapped[str] = mapped_column(String(50))
    total: Mapped[int] = mapped_column(Integer)
    input_errors: Mapped[list[dict[str, object]]] = mapped_column(JSON)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    """The upload's Idempotency-Key, when it sent one: a retry with it returns this batch."""
    request_sha256: Mapped[str | None] = mapped_column(String(64))
    """sha256 of the task and the upload's bytes, so a key reused for another upload is told apart."""


class AuditRow(Base):
    """One response to audit. `report_json` is written once, exactly as the engine produced it, and never changed."""

    __tablename__ = "audits"
    __table_args__ = (
        UniqueConstraint("submitted_by", "idempotency_key", name="uq_audits_idempotency"),
        Index("ix_audits_queue", "status", "id"),
        Index("ix_audits_owner", "submitted_by", "id"),
        Index("ix_audits_owner_status", "submitted_by", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    submitted_by: Mapped[str] = mapped_column(String(200))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_sha256: Mapped[str] = mapped_column(String(64))
    batch_id: Mapped[int | None] = mapped_column(ForeignKey("batches.id"), index=True)
    batch_line: Mapped[int | None] = mapped_column(Integer)
    task: Mapped[str] = mapped_column(String(50), index=True)
    request_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime)
    not_before: Mapped[datetime | None] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    verdict: Mapped[str | None] = mapped_column(String(40), index=True)
    reviewed_verdict: Mapped[str | None] = mapped_column(String(40), index=True)
    """The verdict with the reviewers' labels, once a review overturned a claim (None: the engine's stands)."""
    report_json: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Each model of its team at its own price (store.costs.audit_cost); None: no cost tracked, a model without a
    price, or finished before it was kept (then priced at the desk's one price)."""
    search_text: Mapped[str] = mapped_column(Text)
    """question + response, lower-cased, for `q=` searches."""


class ClaimRow(Base):
    """A claim of a finished audit, indexed from its report for the queue, filters and stats."""

    __tablename__ = "claims"
    __table_args__ = (
        Index("ix_claims_queue", "queue", "audit_id", "position"),
        Index("ix_claims_queue_p", "queue", "p_factual", "audit_id", "position"),
    )

    audit_id: Mapped[int] = mapped_column(ForeignKey("audits.id"), primary_key=True)
    claim_id: Mapped[str] = mapped_column(String(50), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    engine_label: Mapped[str] = mapped_column(String(40), index=True)
    decided_by: Mapped[str] = mapped_column(String(60))
    error_severity: Mapped[int | None] = mapped_column(Integer)
    queue: Mapped[str | None] = mapped_column(String(20))
    """Where the unreviewed claim waits: "needs-review" (the engine did not find it factual) or "spot-check";
    None once a human reviewed it. Kept on finish and review, so the queue is one indexed read."""
    draw: Mapped[float] = mapped_column(Float, default=0.0)
    """The claim's fixed draw in [0, 1) for the seeded spot-check sample (see store.queueing.sample_window)."""
    context: Mapped[str | None] = mapped_column(Text)
    """JSON: the claim's evidence and deciding opinion, copied from the report so the queue parses no report."""
    p_factual: Mapped[float | None] = mapped_column(Float)
    """P(factual | its debate) under the desk's calibration; None without one (or for a prefilter's decision)."""


class ReviewRow(Base):
    """A human decision on a claim's automated outcome. Rows are only ever added."""

    __tablename__ = "reviews"
    __table_args__ = (Index("ix_reviews_claim", "audit_id", "claim_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audits.id"))
    claim_id: Mapped[str] = mapped_column(String(50))
    reviewer: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    decision: Mapped[str] = mapped_column(String(20))
    label: Mapped[str] = mapped_column(String(40))
    engine_label: Mapped[str] = mapped_column(String(40))
    decided_by: Mapped[str] = mapped_column(String(60))
    note: Mapped[str] = mapped_column(Text)


class EventRow(Base):
    """The audit trail: who did what to an audit, when. Rows are only ever added."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_kind", "kind", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audits.id"), index=True)
    at: Mapped[datetime] = mapped_column(DateTime)
    kind: Mapped[str] = mapped_column(String(20))
    actor: Mapped[str | None] = mapped_column(String(200))
    detail: Mapped[str | None] = mapped_column(Text)


class RevokedSessionRow(Base):
    """A UI session ended by logout before its expiry; kept until it would have expired anyway."""

    __tablename__ = "revoked_sessions"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime)


class GuardDecisionRow(Base):
    """What the guard (`debate guard`) did with one answer: the audit keeps the answer and its report, this row the
    request, the policy and the action. Rows are only ever added."""

    __tablename__ = "guard_decisions"
    __table_args__ = (Index("ix_guard_decisions_action", "action", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audits.id"), index=True)
    request_id: Mapped[str] = mapped_column(String(100), unique=True)
    """The request's id (the response's x-debate-request-id)."""
    at: Mapped[datetime] = mapped_column(DateTime)
    caller: Mapped[str] = mapped_column(String(200))
    """The caller's key name, or "anonymous"."""
    route: Mapped[str | None] = mapped_column(String(100))
    policy: Mapped[str] = mapped_column(String(20))
    action: Mapped[str] = mapped_column(String(30))
    status: Mapped[str] = mapped_column(String(20))
    """verified, partial or unverified."""
    risk: Mapped[str | None] = mapped_column(String(20))
    verification_json: Mapped[str] = mapped_column(Text)
    """The verification as the caller received it."""
    report_json: Mapped[str | None] = mapped_column(Text)
    """The report the decision was made on (the cheap checks' alone with --debate later)."""
