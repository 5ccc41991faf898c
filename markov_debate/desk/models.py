"""The desk's answers and reviews (pydantic), shared by the API, the UI and the store (what a client sends to audit
is in markov_debate.desk.requests)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from debate.types import ClaimLabel, Evidence, Report
from markov_debate.desk.requests import AuditRequest, StorableText

__all__ = [
    "AuditDetail",
    "AuditPage",
    "AuditStatus",
    "AuditSummary",
    "BatchInfo",
    "EngineLabel",
    "EventInfo",
    "GuardAction",
    "QueueItem",
    "ReviewIn",
    "ReviewInfo",
    "Stats",
    "UtcDatetime",
    "iso_moment",
]

AuditStatus = Literal["pending", "running", "done", "failed", "cancelled"]
EngineLabel = Literal["factual", "non_factual", "not_enough_evidence", "unverifiable"]
"""A claim's automated outcome: its label, or `unverifiable` when a failure left it without one."""
GuardAction = Literal["passed", "annotated", "flagged", "blocked", "passed-unverified", "refused"]
"""What `debate guard` did with an answer (its decision's `action`)."""
EventKind = Literal[
    "submitted", "claimed", "requeued", "deferred", "finished", "failed", "cancelled", "discarded", "reviewed"
]


def _utc(value: datetime) -> datetime:
    # The store keeps UTC without an offset (SQLite has no time zone type): the API says which zone it is.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]
"""A moment as the API shows it: RFC 3339 with its offset (UTC), as the published schema's date-time requires."""


def iso_moment(value: object) -> object:
    """A moment given in a query must be written as one (2026-01-31 or 2026-01-31T12:00:00Z): pydantic would also
    read a bare number as seconds since 1970, which the published date-time format is not."""
    if isinstance(value, str) and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
        raise ValueError("expected a date-time such as 2026-01-31T12:00:00Z, not a number")
    return value


class EventInfo(BaseModel):
    """One entry of an audit's append-only trail."""

    at: UtcDatetime
    kind: EventKind
    actor: str | None
    """The worker or key name behind it."""
    detail: str | None


class ReviewIn(BaseModel):
    """A reviewer's decision on one claim's automated outcome."""

    decision: Literal["confirm", "overturn"]
    """confirm: the engine's label is right; overturn: it is wrong (give the right label)."""
    label: ClaimLabel | None = None
    """The right label: required to overturn; when confirming it must be the engine's (or left out)."""
    note: StorableText = Field(default="", max_length=5000)
    """Why (shown in the trail)."""
    seen_label: EngineLabel | None = None
    """The claim's label as the reviewer saw it (its latest review's label, else the engine's). When given and the
    label has changed since, the review is refused (409 with the current label) instead of silently replacing a
    colleague's decision. The UI always sends it."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        json_schema_extra={
            "if": {"properties": {"decision": {"const": "overturn"}}},
            "then": {"required": ["label"], "properties": {"label": {"type": "string"}}},
        },
    )

    @model_validator(mode="after")
    def _overturn_names_the_label(self) -> Self:
        if self.decision == "overturn" and self.label is None:
            raise ValueError("overturn needs the right label")
        return self


class ReviewInfo(BaseModel):
    """A stored review: never edited; a later review of the same claim supersedes it."""

    id: int
    audit_id: int
    claim_id: str
    reviewer: str
    created_at: UtcDatetime
    decision: Literal["confirm", "overturn"]
    label: ClaimLabel
    engine_label: EngineLabel
    """The automated outcome that was judged."""
    decided_by: str
    """`debate` or the prefilter that decided the claim."""
    note: str


class AuditSummary(BaseModel):
    """An audit in a list."""

    id: int
    status: AuditStatus
    task: str
    created_at: UtcDatetime
    finished_at: UtcDatetime | None
    submitted_by: str
    batch_id: int | None
    verdict: str | None
    """The report's verdict once done (the engine's)."""
    reviewed_verdict: str | None = None
    """The verdict with the reviewers' labels, once a review overturned a claim (None: the engine's stands)."""
    question: str | None
    response_excerpt: str
    claims: int
    reviewed_claims: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cost_per_model: bool = False
    """The cost is each model of its team at its own price; False: every token at the desk's one price (an audit
    finished before that was kept, or a model of its team without a price)."""
    error: str | None


class AuditDetail(AuditSummary):
    """An audit with its request, report (as the engine produced it), reviews and trail."""

    request: AuditRequest
    report: Report | None
    attempts: int
    reviews: list[ReviewInfo]
    events: list[EventInfo]


class AuditPage(BaseModel):
    items: list[AuditSummary]
    total: int
    page: int
    per_page: int
    next_before: int | None = None
    """Pass as `before=` for the next, older page (None: this is the last): a read that costs the same at any
    depth, where `page=` N skips N-1 pages of rows first."""


class QueueItem(BaseModel):
    """A claim waiting for a human: why it is in the queue and what the engine decided."""

    audit_id: int
    claim_id: str
    reason: Literal["needs-review", "spot-check", "label-next"]
    """needs-review: the engine did not find it factual; spot-check: a seeded sample of confident decisions;
    label-next: the calibration asks for its label (`order=label-next`; `why` says why)."""
    text: str
    engine_label: EngineLabel
    decided_by: str
    error_severity: int | None
    task: str
    evidence: list[Evidence] = Field(default_factory=list)
    """What the agents judged the claim against, as numbered in the audit page."""
    final_opinion: str | None = None
    """The deciding opinion: the last agent's, or the prefilter's reason when a prefilter decided."""
    p_factual: float | None = None
    """P(factual | its debate) under the desk's calibration (`debate serve --debate.calibration FILE`); None
    without one."""
    why: str | None = None
    """Why the calibration asks for this claim's label (label-next only), as its fit said it."""


class BatchInfo(BaseModel):
    """A batch upload and its progress."""

    id: int
    created_at: UtcDatetime
    submitted_by: str
    name: str
    task: str
    total: int
    counts: dict[str, int]
    """Audits by status."""
    input_errors: list[dict[str, Any]]
    """Lines that could not be read ({line, message}); the other lines were queued."""
    done: bool


class AgreementPoint(BaseModel):
    model_config = ConfigDict(frozen=True)  # hashable: the dashboard's chart is cached by its points

    period: str
    """The day (or week) the reviews were made."""
    reviews: int
    agreement: float
    """Share of reviews that confirmed the engine's label."""
    kappa: float | None
    """Cohen's kappa between the reviewers' and the engine's labels (None when undefined)."""


class Stats(BaseModel):
    """Counts, agreement between reviewers and the engine, usage and cost."""

    by_status: dict[str, int]
    by_verdict: dict[str, int]
    by_task: dict[str, int]
    reviews: int
    reviewed_claims: int
    agreement: float | None
    kappa: float | None
    over_time: list[AgreementPoint]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    flat_priced: int = 0
    """Audits in `cost` at the desk's one price (finished before each model's own was kept, or a model of the
    team without a price): every other audit is each model at its own price."""
