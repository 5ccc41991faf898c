"""The results log's records, typed: a tagged union of a verified response, an error for an input line, and an
experiment's prediction. Every writer produces one of these and every reader gets one back.

The tag is read from a record's shape (a `result`, an `error` object, or a `pred_factual`), not from a field of
its own, so logs written before these models existed still resume. A batch record keeps the input line's own
fields (id, question, response, ...) beside ours; they ride along as extra fields.

One rule decides whether a record is finished work (`is_final`), and one whether a verdict trips `--fail-on`
(`fails_on`); the batch, the desk and the experiments all use them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from debate.errors import InputError, validation_problem
from debate.files import decode_text, load_json
from debate.types import Failure, Report, ReportVerdict

__all__ = [
    "TRANSIENT_ERROR_KINDS",
    "ErrorInfo",
    "ErrorRecord",
    "FailOn",
    "PredictionRecord",
    "Record",
    "ResultRecord",
    "fails_on",
    "outcome_of",
    "parse_record",
    "read_records",
    "transient_failure",
]

log = logging.getLogger(__name__)

TRANSIENT_ERROR_KINDS = frozenset({"model_unavailable"})
"""Error kinds that may pass (the endpoint was down): such an error record is redone on the next run."""

FailOn = Literal["non-factual", "unverifiable", "any"]
"""Which verdicts make `--fail-on` return exit 3."""

_FAILING: dict[str, frozenset[str]] = {
    "non-factual": frozenset({"non_factual"}),
    # Not enough evidence is not a verified factual answer: a CI gate on "unverifiable" catches it too.
    "unverifiable": frozenset({"unverifiable", "not_enough_evidence"}),
    "any": frozenset({"non_factual", "unverifiable", "not_enough_evidence"}),
}


def fails_on(verdict: str, rule: FailOn | None) -> bool:
    """Whether a verdict matches `--fail-on` (a record's verdict: an error record's is `unverifiable`)."""
    return rule is not None and verdict in _FAILING[rule]


def outcome_of(record: Record) -> str:
    """What a record says of its input line: its verdict (a ReportVerdict) when it was checked; `error` when it has
    no report (an input error, a final model error), `failed` when its report's claims could not be obtained."""
    if isinstance(record, ErrorRecord):
        return "error"
    if isinstance(record, ResultRecord) and record.result.failure is not None:
        return "failed"
    return record.verdict


def transient_failure(report: Report) -> Failure | None:
    """The report's first failure that may pass (endpoint down, timeouts, 5xx), on the response or on a claim."""
    failures = [report.failure, *(claim.failure for claim in report.claims)]
    return next((f for f in failures if f is not None and f.transient), None)


class _Record(BaseModel):
    # The input line's own fields are kept as they were given.
    model_config = ConfigDict(extra="allow", frozen=True)

    def to_json(self) -> str:
        """One log line: the input's fields first (as a reader scans them), then ours."""
        extra = dict(self.model_extra or {})
        ours = self.model_dump(mode="json", exclude=set(extra) | self._omit_when_none())
        return json.dumps({**extra, **ours}, ensure_ascii=False)

    def _omit_when_none(self) -> set[str]:
        return set()

    def _input_id(self) -> str | None:
        value = (self.model_extra or {}).get("id")
        return None if value is None else str(value)


class ResultRecord(_Record):
    """A response that was verified (its report may still carry a failure)."""

    line: int | None = None
    """The input line (1-based); None when the caller has no lines."""
    result: Report
    """The report."""
    input_sha256: str | None = None
    """The digest of the input line's fields that decide the verdict (BatchItem.content_sha256): a re-run redoes a
    line whose content changed since. None in records made before it was kept."""

    def _omit_when_none(self) -> set[str]:
        return {"input_sha256"} if self.input_sha256 is None else set()

    @property
    def key(self) -> str | None:
        """The input's id."""
        return self._input_id()

    @property
    def is_final(self) -> bool:
        """Finished unless a transient failure left part of it undone."""
        return transient_failure(self.result) is None

    @property
    def verdict(self) -> ReportVerdict:
        return self.result.verdict

    @property
    def failure_message(self) -> str | None:
        failure = transient_failure(self.result) or self.result.failure
        if failure is None:
            failure = next((c.failure for c in self.result.claims if c.failure is not None), None)
        return None if failure is None else failure.message


class ErrorInfo(BaseModel):
    """Why an input line has no report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    """input (the line itself is wrong), or the failure's kind (model_unavailable, ...)."""
    message: str
    """What went wrong, naming the line."""


class ErrorRecord(_Record):
    """An input line that produced no report."""

    line: int
    """The input line (1-based)."""
    error: ErrorInfo
    """Why."""
    line_sha256: str | None = None
    """For an input error: the hash of the line as it was; a fixed line is redone."""

    def _omit_when_none(self) -> set[str]:
        return {"line_sha256"} if self.line_sha256 is None else set()

    @property
    def key(self) -> str:
        return f"line:{self.line}"

    @property
    def is_final(self) -> bool:
        return self.error.kind not in TRANSIENT_ERROR_KINDS

    @property
    def verdict(self) -> ReportVerdict:
        return "unverifiable"

    @property
    def failure_message(self) -> str:
        return self.error.message


class PredictionRecord(_Record):
    """One benchmark item's prediction in an experiment's results.jsonl."""

    id: str
    """The item id (halueval-<task>-<line>, factprompts-<line>[-c<claim>])."""
    task: str
    """The item's task."""
    label_factual: bool
    """The gold label."""
    pred_factual: bool | None
    """The prediction; None when unverifiable or failed (scored as wrong)."""
    score: float | None = None
    """Higher = more factual, for AUROC."""
    p_factual: float | None = None
    """With a calibration: P(the response is factual) under its rollup (the report's p_factual)."""
    decided_by: str
    """debate, prefilter:<name>, mixed, judge, none or error."""
    llm_calls: int = Field(default=0, ge=0)
    """Model calls spent on the item."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Prompt tokens."""
    completion_tokens: int = Field(default=0, ge=0)
    """Completion tokens."""
    wall_s: float = 0.0
    """Seconds from the item's start to its prediction."""
    length: int = 0
    """The response's length in characters."""
    source_line: int | None = None
    """The item's line in its benchmark file."""
    error: str | None = None
    """Why there is no prediction."""
    transient: bool = False
    """The prediction is missing for a reason that may pass: a re-run redoes it."""
    report: dict[str, Any] | None = None
    """The full report (or a judge's transcript); left out when only the scalars are read."""
    input_sha256: str | None = None
    """The digest of the item's fields that decide its prediction (Item.content_sha256): a resumed run redoes an
    item whose data changed since. None in records made before it was kept."""

    def _omit_when_none(self) -> set[str]:
        return {"input_sha256"} if self.input_sha256 is None else set()

    @property
    def key(self) -> str:
        return self.id

    @property
    def is_final(self) -> bool:
        return not self.transient

    @property
    def verdict(self) -> ReportVerdict:
        if self.pred_factual is None:
            return "unverifiable"
        return "factual" if self.pred_factual else "non_factual"

    @property
    def failure_message(self) -> str | None:
        return self.error


def record_content(record: Record) -> str | None:
    """The digest of the input fields that decided `record`: the one it keeps, else (a record made before it was
    kept) the one its carried input fields give; None for an error record or fields that are not an item's."""
    if isinstance(record, ErrorRecord):
        return None
    if record.input_sha256 is not None or isinstance(record, PredictionRecord):
        return record.input_sha256
    from debate.results._items import BatchItem

    try:
        return BatchItem.model_validate(record.model_extra or {}).content_sha256()
    except ValidationError:
        return None


def _kind(value: Any) -> str | None:
    if isinstance(value, _Record):
        return {ResultRecord: "result", ErrorRecord: "error", PredictionRecord: "prediction"}.get(type(value))
    if not isinstance(value, dict):
        return None
    if "pred_factual" in value:
        return "prediction"
    if isinstance(value.get("error"), dict):
        return "error"
    return "result" if "result" in value else None


Record = Annotated[
    Annotated[ResultRecord, Tag("result")]
    | Annotated[ErrorRecord, Tag("error")]
    | Annotated[PredictionRecord, Tag("prediction")],
    Discriminator(_kind),
]
"""Any record of a results log."""

_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


def parse_record(data: Any) -> Record:
    """A record from its JSON value; pydantic's ValidationError when it is none of the three."""
    return _RECORD.validate_python(data)


def read_records(path: Path) -> list[Record]:
    """Every record of a results log, in file order; a line that is not a record is an InputError naming it."""
    records = []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path} line {number}"
            data = load_json(decode_text(raw, where), where)
            try:
                records.append(_RECORD.validate_python(data))
            except ValidationError as exc:
                raise InputError(f"{where}: not a results record ({validation_problem(exc)})") from exc
            except RecursionError as exc:
                raise InputError(f"{where}: not a results record (nested too deeply to read)") from exc
    return records
