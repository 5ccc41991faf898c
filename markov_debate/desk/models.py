"""The desk's request and response bodies (pydantic), shared by the API, the UI and the store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticSerializationError

from debate.config import VerifierConfig
from debate.engine import PROMPT_SETS
from debate.errors import InputError
from debate.plugins import CHAINS, PREFILTERS, ROLLUPS, TASKS
from debate.registry import Registry
from debate.types import ClaimLabel, Evidence, Report

__all__ = [
    "MAX_DEPTH",
    "AuditDetail",
    "AuditOverrides",
    "AuditPage",
    "AuditRequest",
    "AuditStatus",
    "AuditSummary",
    "BatchInfo",
    "EngineLabel",
    "EventInfo",
    "QueueItem",
    "ReviewIn",
    "ReviewInfo",
    "Stats",
    "UtcDatetime",
    "checked_request",
    "iso_moment",
    "load_request",
]

AuditStatus = Literal["pending", "running", "done", "failed", "cancelled"]
EngineLabel = Literal["factual", "non_factual", "not_enough_evidence", "unverifiable"]
"""A claim's automated outcome: its label, or `unverifiable` when a failure left it without one."""
EventKind = Literal[
    "submitted", "claimed", "requeued", "deferred", "finished", "failed", "cancelled", "discarded", "reviewed"
]

_TEXT_LIMIT = 200_000
MAX_DEPTH = 64
"""Nesting a request may have (a reference of passages is 2 deep; pydantic's JSON reader stops at 200)."""


def _utc(value: datetime) -> datetime:
    # The store keeps UTC without an offset (SQLite has no time zone type): the API says which zone it is.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]


def iso_moment(value: object) -> object:
    """A moment given in a query must be written as one (2026-01-31 or 2026-01-31T12:00:00Z): pydantic would also
    read a bare number as seconds since 1970, which the published date-time format is not."""
    if isinstance(value, str) and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
        raise ValueError("expected a date-time such as 2026-01-31T12:00:00Z, not a number")
    return value


"""A moment as the API shows it: RFC 3339 with its offset (UTC), as the published schema's date-time requires."""


def _names(registry: Registry[Any] | tuple[str, ...], *, nullable: bool = False, items: bool = False) -> Any:
    """A field's JSON schema listing the registered names it takes, computed when the schema is made (plugins
    included), so that what the published schema allows is what the desk accepts."""

    def extra(schema: dict[str, Any]) -> None:
        names: list[Any] = list(registry) if isinstance(registry, tuple) else registry.names()
        if items:
            schema["anyOf"] = [{"type": "array", "items": {"type": "string", "enum": names}}, {"type": "null"}]
            return
        schema.pop("anyOf", None)
        schema.pop("type", None)
        schema["enum"] = [*names, None] if nullable else names

    return extra


def _triplets_of_three(schema: dict[str, Any]) -> None:
    """The schema says a triplet has three parts (the validator says which claim has not, in its own words)."""
    for option in schema.get("anyOf", []):
        items = option.get("items", {})
        if items.get("type") == "array":
            items.update(minItems=3, maxItems=3)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def load_request(text: str | bytes) -> AuditRequest:
    """The one reader of a stored request: the worker loads with this what `checked_request` accepted at submit."""
    return AuditRequest.model_validate_json(text)


def checked_request(request: AuditRequest, *, max_claims: int | None) -> str:
    """The request as the store keeps it, proven loadable by `load_request` with its own limits (nesting depth,
    text that a database column or JSON cannot hold), so nothing is accepted that a worker cannot read back.
    Raises InputError naming the field."""
    if request.claims is not None and max_claims is not None and len(request.claims) > max_claims:
        raise InputError(f"claims: {len(request.claims)} given; the limit is {max_claims} (the desk's max_claims)")
    where = _unstorable_text(request.model_dump(), "")
    if where is not None:
        raise InputError(where)
    try:
        text = request.model_dump_json()
        load_request(text)
    except (ValueError, PydanticSerializationError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        field = ".".join(map(str, first["loc"])) if first else "request"
        reason = first["msg"] if first else str(exc)
        raise InputError(f"{field or 'request'}: cannot be stored and read back ({reason})") from exc
    return text


def _unstorable_text(value: Any, path: str, depth: int = 0) -> str | None:
    """Where a request holds what no store keeps (a NUL, a lone surrogate) or nests too deep to read back."""
    if depth > MAX_DEPTH:
        top = ".".join(path.split(".")[:3])
        return f"{top or 'request'}: nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path}: NUL characters are not allowed"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path}: a lone surrogate (not valid Unicode text)"
        return None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _unstorable_text(child, f"{path}.{key}" if path else str(key), depth + 1)
        if found is not None:
            return found
    return None


class AuditOverrides(_In):
    """Per-audit changes to the server's Verifier configuration (named, registered choices only)."""

    min_rounds: int | None = Field(default=None, strict=True, ge=0, le=10)
    """Debate rounds before consensus may stop the chain."""
    max_rounds: int | None = Field(default=None, strict=True, ge=1, le=20)
    """Round limit."""
    chain: str | None = Field(default=None, json_schema_extra=_names(CHAINS, nullable=True))
    """A registered chain (transition rule), e.g. true-to-skeptic."""
    rollup: str | None = Field(default=None, json_schema_extra=_names(ROLLUPS, nullable=True))
    """A registered claims-to-response rule."""
    prompt_set: str | None = Field(default=None, json_schema_extra=_names(PROMPT_SETS, nullable=True))
    """A packaged prompt set (directories are not accepted over HTTP)."""
    prefilters: list[str] | None = Field(default=None, json_schema_extra=_names(PREFILTERS, items=True))
    """Registered prefilters to run before the debate (empty: none)."""
    max_claims: int | None = Field(default=None, strict=True, ge=1, le=200)
    """Most claims extracted from the response."""

    @field_validator("chain")
    @classmethod
    def _chain(cls, value: str | None) -> str | None:
        return _choice(value, CHAINS.names(), "chain")

    @field_validator("rollup")
    @classmethod
    def _rollup(cls, value: str | None) -> str | None:
        return _choice(value, ROLLUPS.names(), "rollup")

    @field_validator("prompt_set")
    @classmethod
    def _prompt_set(cls, value: str | None) -> str | None:
        return _choice(value, list(PROMPT_SETS), "prompt set")

    @field_validator("prefilters")
    @classmethod
    def _prefilters(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            _choice(name, PREFILTERS.names(), "prefilter")
        return value

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)

    def apply(self, config: VerifierConfig) -> VerifierConfig:
        """The configuration one audit runs with (raises pydantic's ValidationError for an inconsistent one)."""
        data = config.model_dump()
        for section, field, value in (
            ("debate", "min_rounds", self.min_rounds),
            ("debate", "max_rounds", self.max_rounds),
            ("debate", "chain", self.chain),
            ("prefilter", "prefilters", self.prefilters),
            ("claims", "max_claims", self.max_claims),
        ):
            if value is not None:
                data[section][field] = value
        if self.rollup is not None:
            data["rollup"] = self.rollup
        if self.prompt_set is not None:
            data["prompt_set"] = self.prompt_set
        # Validated again as a whole: e.g. min_rounds above max_rounds is refused here, as the CLI refuses it.
        return VerifierConfig.model_validate(data)


def _choice(value: str | None, names: list[str], what: str) -> str | None:
    if value is not None and value not in names:
        raise ValueError(f"unknown {what} {value!r}; choose one of: {', '.join(names)}")
    return value


class AuditRequest(_In):
    """One response to audit (the fields of `debate verify`, RefChecker's names)."""

    task: str = Field(default="qa", json_schema_extra=_names(TASKS))
    """The task setting (qa, summarization, dialogue, kbqa, general, rag)."""
    question: str | None = Field(default=None, max_length=_TEXT_LIMIT)
    """The question the response answers (dialogue: the dialogue history)."""
    response: str = Field(min_length=1, max_length=_TEXT_LIMIT)
    """The text to check."""
    reference: str | dict[str, str] | list[str] | list[dict[str, Any]] | None = None
    """Knowledge or source document, passages, or for task rag the sources ({id: text} or [{id, text, parent_id}])."""
    claims: list[str] | list[list[str]] | None = Field(default=None, json_schema_extra=_triplets_of_three)
    """Claims to verify instead of extracting them (sentences or triplets)."""
    overrides: AuditOverrides = Field(default_factory=AuditOverrides)
    """Changes to the server's configuration for this audit."""

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        return _choice(value, TASKS.names(), "task") or value

    @field_validator("response")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class EventInfo(BaseModel):
    """One entry of an audit's append-only trail."""

    at: UtcDatetime
    kind: EventKind
    actor: str | None
    """The worker or key name behind it."""
    detail: str | None


class ReviewIn(_In):
    """A reviewer's decision on one claim's automated outcome."""

    decision: Literal["confirm", "overturn"]
    """confirm: the engine's label is right; overturn: it is wrong (give the right label)."""
    label: ClaimLabel | None = None
    """The right label: required to overturn; when confirming it must be the engine's (or left out)."""
    note: str = Field(default="", max_length=5000)
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


class QueueItem(BaseModel):
    """A claim waiting for a human: why it is in the queue and what the engine decided."""

    audit_id: int
    claim_id: str
    reason: Literal["needs-review", "spot-check"]
    """needs-review: the engine did not find it factual; spot-check: a seeded sample of confident decisions."""
    text: str
    engine_label: EngineLabel
    decided_by: str
    error_severity: int | None
    task: str
    evidence: list[Evidence] = Field(default_factory=list)
    """What the agents judged the claim against, as numbered in the audit page."""
    final_opinion: str | None = None
    """The deciding opinion: the last agent's, or the prefilter's reason when a prefilter decided."""


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
