"""What a client sends to audit a response: one request (`POST /v1/audits`), the lines of a batch upload, and the
per-audit configuration changes; with the one reader and the storability check the worker relies on."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

from debate.calls import PROMPT_SETS
from debate.config import VerifierConfig
from debate.errors import InputError
from debate.plugins import CHAINS, PREFILTERS, ROLLUPS, TASKS
from debate.registry import Registry
from debate.types import Source

__all__ = [
    "MAX_DEPTH",
    "AuditOverrides",
    "AuditRequest",
    "BatchLine",
    "StorableText",
    "checked_request",
    "load_request",
    "unstorable",
]

_TEXT_LIMIT = 200_000
MAX_DEPTH = 64
"""Nesting a request may have (a reference of passages is 2 deep; pydantic's JSON reader stops at 200)."""


def _names(registry: Registry[Any] | tuple[str, ...], *, nullable: bool = False, items: bool = False) -> Any:
    """A field's JSON schema listing the registered names it takes, computed when the schema is made (plugins
    included), so that what the published schema allows is what the desk accepts."""

    def extra(schema: dict[str, Any]) -> None:
        names: list[Any] = list(registry) if isinstance(registry, tuple) else registry.names()
        if items:
            listed = {"type": "array", "items": {"type": "string", "enum": names}, "uniqueItems": True}
            schema["anyOf"] = [listed, {"type": "null"}]
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


def _whole(value: object) -> object:
    """A count as JSON Schema's `integer` has it (12 and 12.0 alike), but never true, "12" or 12.5: pydantic's lax
    mode would take the first two and its strict mode refuses 12.0."""
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("expected a whole number")
        return int(value)
    return value


def _sources_listed(schema: dict[str, Any]) -> None:
    """A list of objects is a list of sources, read as debate.types.Source (the validator keeps the caller's dicts,
    so that a batch line's evidence reads them as the CLI does)."""
    source = Source.model_json_schema()
    source.pop("title", None)
    for option in schema.get("anyOf", []):
        if option.get("items", {}).get("type") == "object":
            option["items"] = source


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


def unstorable(text: str) -> str | None:
    """Why no store can keep `text` (a NUL, a lone surrogate), or None: the desk's one rule for what it refuses."""
    if "\x00" in text:
        return "NUL characters are not allowed"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate (not valid Unicode text)"
    return None


def _storable(text: str) -> str:
    why = unstorable(text)
    if why is not None:
        raise ValueError(why)
    return text


StorableText = Annotated[str, AfterValidator(_storable)]
"""Text a body field may hold: what every store keeps (refused with 422 naming the field otherwise)."""


def _unstorable_text(value: Any, path: str, depth: int = 0) -> str | None:
    """Where a request holds what no store keeps (a NUL, a lone surrogate) or nests too deep to read back."""
    if depth > MAX_DEPTH:
        top = ".".join(path.split(".")[:3])
        return f"{top or 'request'}: nested more than {MAX_DEPTH} levels deep"
    if isinstance(value, str):
        why = unstorable(value)
        return None if why is None else f"{path}: {why}"
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _unstorable_text(child, f"{path}.{key}" if path else str(key), depth + 1)
        if found is not None:
            return found
    return None


class AuditOverrides(_In):
    """Per-audit changes to the server's Verifier configuration (named, registered choices only)."""

    min_rounds: int | None = Field(default=None, ge=0, le=10)
    """Debate rounds before consensus may stop the chain."""
    max_rounds: int | None = Field(default=None, ge=1, le=20)
    """Round limit."""
    chain: str | None = Field(default=None, json_schema_extra=_names(CHAINS, nullable=True))
    """A registered chain (transition rule), e.g. true-to-skeptic."""
    rollup: str | None = Field(default=None, json_schema_extra=_names(ROLLUPS, nullable=True))
    """A registered claims-to-response rule."""
    prompt_set: str | None = Field(default=None, json_schema_extra=_names(PROMPT_SETS, nullable=True))
    """A packaged prompt set (directories are not accepted over HTTP)."""
    prefilters: list[str] | None = Field(default=None, json_schema_extra=_names(PREFILTERS, items=True))
    """Registered prefilters to run before the debate (empty: none)."""
    max_claims: int | None = Field(default=None, ge=1, le=200)
    """Most claims extracted from the response."""

    _counts = field_validator("min_rounds", "max_rounds", "max_claims", mode="before")(_whole)

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
        # A long value is quoted by its start: the answer names the field, it does not echo the input back.
        shown = repr(value) if len(value) <= 80 else f"{value[:60]!r}... ({len(value):,} characters)"
        raise ValueError(f"unknown {what} {shown}; choose one of: {', '.join(names)}")
    return value


class _Item(_In):
    question: str | None = Field(default=None, max_length=_TEXT_LIMIT)
    """The question the response answers (dialogue: the dialogue history)."""
    # Not blank: the validator says so. A `pattern` saying it too would stop schemathesis 4.32's coverage phase from
    # making any valid body for this schema (a pattern with a 200,000 maxLength), so the schema leaves it out.
    response: str = Field(min_length=1, max_length=_TEXT_LIMIT)
    """The text to check (not blank)."""
    reference: str | dict[str, str] | list[str] | list[dict[str, Any]] | None = Field(
        default=None, json_schema_extra=_sources_listed
    )
    """Knowledge or source document, passages, or for task rag the sources ({id: text} or [{id, text, parent_id}])."""
    claims: list[str] | list[list[str]] | None = Field(default=None, json_schema_extra=_triplets_of_three)
    """Claims to verify instead of extracting them (sentences or triplets)."""

    @field_validator("response")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


def _tasks_need(schema: dict[str, Any]) -> None:
    """What a task refuses without, said in the schema as well (a client generating requests from it, schemathesis
    among them, never builds one the desk refuses): summarization needs its document, rag its sources."""
    some = [{"type": "array", "minItems": 1}, {"type": "object", "minProperties": 1}]
    sources = [{"type": "array", "minItems": 1, "items": {"type": "object"}}, {"type": "object", "minProperties": 1}]
    needs = {
        "summarization": [{"type": "string", "pattern": "\\S"}, *some],
        "rag": sources,  # sources with ids its citations name: a list of plain texts has none
    }
    schema["allOf"] = [
        {
            "if": {"properties": {"task": {"const": task}}, "required": ["task"]},
            "then": {"required": ["reference"], "properties": {"reference": {"anyOf": shapes}}},
        }
        for task, shapes in needs.items()
    ]


class AuditRequest(_Item):
    """One response to audit (the fields of `debate verify`, RefChecker's names)."""

    model_config = ConfigDict(json_schema_extra=_tasks_need)

    task: str = Field(default="qa", json_schema_extra=_names(TASKS))
    """The task setting (qa, summarization, dialogue, kbqa, general, rag)."""
    overrides: AuditOverrides = Field(default_factory=AuditOverrides)
    """Changes to the server's configuration for this audit."""

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        return _choice(value, TASKS.names(), "task") or value


class BatchLine(_Item):
    """One item of a batch upload (RefChecker's field names; the batch's `task` applies to every item, and fields
    other than these are ignored). Documents the upload's body: the desk reads it with debate.results.read_items."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    id: Annotated[str, Field(min_length=1)] | int | None = None
    """The item's id: required on a JSON line; in a JSON array its index stands in when it is left out."""
    overrides: AuditOverrides | None = None
    """This item's changes to the desk's configuration, as a single audit's (a line they do not fit is listed in
    the batch's input_errors)."""
