"""`debate export phoenix`: a finished results log into Phoenix, as traces with their evaluations.

Each verified response becomes a trace (a `verify` span with one `claim` span per claim, timed from the report:
it ends at the report's `created_at` and lasts its `elapsed_s`; claims carry no timing of their own, so their spans
share the response's interval). Verdicts go in twice, as `gen_ai.evaluation.result` events (any OTLP backend) and
as Phoenix span annotations (what Phoenix's UI lists and filters): the engine's verdicts with annotator kind LLM,
and, from a desk export, each reviewer's label with annotator kind HUMAN.

Reads a results log (`debate verify --input ... --output`), an experiment's run folder (its results.jsonl), or the
desk's JSONL export (`/api/export?format=jsonl`, whose reviews become the human annotations). A line that is none of
these is reported by number and skipped; the others are exported.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from debate.errors import UsageError, validation_problem
from debate.extras import require_extra
from debate.pipeline import claim_evaluation
from debate.results import ErrorRecord, PredictionRecord, ResultRecord, parse_record
from debate.telemetry import EVALUATION_EVENT, SPAN_KIND
from debate.types import ClaimVerdict, Report

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

__all__ = ["DEFAULT_PHOENIX_URL", "ExportSummary", "Review", "export_to_phoenix", "read_exportable"]

DEFAULT_PHOENIX_URL = "http://127.0.0.1:6006"
_ANNOTATIONS_PER_REQUEST = 100


class Review(BaseModel):
    """A desk reviewer's decision on one claim (a line of the desk's JSONL export)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    claim_id: str
    """The claim reviewed."""
    reviewer: str
    """Who reviewed it."""
    decision: str
    """agree, disagree or unsure."""
    label: str | None = None
    """The label the reviewer gives the claim."""
    engine_label: str | None = None
    """The engine's label the reviewer saw."""
    note: str | None = None
    """The reviewer's note."""


@dataclass
class Exportable:
    """One line to export: its report (None for an error line), its error, and any human reviews."""

    line: int
    key: str
    report: Report | None
    error: str | None = None
    reviews: list[Review] = field(default_factory=list)


@dataclass
class ExportSummary:
    """What an export sent."""

    traces: int = 0
    """Traces (one per line with a report or an error)."""
    spans: int = 0
    """Spans sent."""
    annotations: int = 0
    """Span annotations Phoenix accepted (engine verdicts and human reviews)."""
    human: int = 0
    """Of which human reviews."""
    skipped: list[str] = field(default_factory=list)
    """Lines that could not be read, each naming its line and why."""


def _results_file(path: Path) -> Path:
    if path.is_dir():
        found = path / "results.jsonl"
        if not found.is_file():
            raise UsageError(f"{path}: a run folder needs its results.jsonl")
        return found
    if not path.is_file():
        raise UsageError(f"{path}: no such file or folder")
    return path


def _exportable(number: int, data: Any) -> Exportable:
    if isinstance(data, dict) and "audit_id" in data and "report" in data:  # a desk export line
        report = Report.model_validate(data["report"]) if data["report"] is not None else None
        reviews = [Review.model_validate(r) for r in data.get("reviews") or []]
        error = None if report is not None else "the audit has no report (not finished)"
        return Exportable(number, f"audit-{data['audit_id']}", report, error, reviews)
    record = parse_record(data)
    key = (record.model_extra or {}).get("id") or f"line-{number}"
    if isinstance(record, ResultRecord):
        return Exportable(number, str(key), record.result)
    if isinstance(record, ErrorRecord):
        return Exportable(number, str(key), None, f"{record.error.kind}: {record.error.message}")
    assert isinstance(record, PredictionRecord)
    if record.report is None:
        return Exportable(number, record.id, None, record.error or "no report recorded")
    return Exportable(number, record.id, Report.model_validate(record.report))


def read_exportable(path: Path, skipped: list[str]) -> Iterator[Exportable]:
    """The lines of a results log, run folder or desk export; unreadable lines are added to `skipped`."""
    source = _results_file(path)
    with source.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield _exportable(number, json.loads(line))
            except json.JSONDecodeError as exc:
                skipped.append(f"{source} line {number}: not valid JSON ({exc.msg})")
            except ValidationError as exc:
                skipped.append(f"{source} line {number}: not a results record ({validation_problem(exc)})")


def _ns(report: Report) -> tuple[int, int]:
    end = report.meta.created_at
    start = end - timedelta(seconds=report.elapsed_s)
    return int(start.timestamp() * 1e9), int(end.timestamp() * 1e9)


def _span_id(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


class _Exporter:
    def __init__(self, provider: TracerProvider, summary: ExportSummary) -> None:
        self.tracer = provider.get_tracer("markov_debate.export")
        self.summary = summary
        self.annotations: list[dict[str, Any]] = []

    def annotate(self, span: Span, name: str, kind: str, result: dict[str, Any], **metadata: Any) -> None:
        self.annotations.append(
            {
                "span_id": _span_id(span),
                "name": name,
                "annotator_kind": kind,
                "result": {k: v for k, v in result.items() if v is not None},
                "metadata": metadata,
                "identifier": f"{name}:{metadata.get('reviewer', 'markov-debate')}",
            }
        )

    def item(self, item: Exportable) -> None:
        from opentelemetry.trace import Status, StatusCode, set_span_in_context

        report = item.report
        start, end = _ns(report) if report is not None else (None, None)
        attributes: dict[str, str | int] = {SPAN_KIND: "CHAIN", "debate.item": item.key, "debate.line": item.line}
        if report is not None:
            attributes |= {"input.value": report.response, "output.value": report.verdict, "debate.task": report.task}
        root = self.tracer.start_span("verify", attributes=attributes, start_time=start)
        self.summary.traces += 1
        self.summary.spans += 1
        if report is None or end is None:
            root.set_status(Status(StatusCode.ERROR, item.error or "no report"))
            root.end()
            return
        verdict = {"label": report.verdict, "score": report.score, "explanation": report.note}
        root.add_event(EVALUATION_EVENT, _event("hallucination", verdict), timestamp=end)
        self.annotate(root, "hallucination", "LLM", verdict, model=report.meta.model)
        reviews = {r.claim_id: r for r in item.reviews}  # the latest review of each claim
        for claim in report.claims:
            child = self.tracer.start_span(
                f"claim {claim.claim_id}",
                context=set_span_in_context(root),
                start_time=start,
                attributes={
                    SPAN_KIND: "EVALUATOR",
                    "input.value": claim.text,
                    "output.value": claim.label or claim.status,
                    "debate.decided_by": claim.decided_by,
                },
            )
            self.claim(child, claim, reviews.get(claim.claim_id), end)
            child.end(end_time=end)
            self.summary.spans += 1
        root.end(end_time=end)

    def claim(self, span: Span, claim: ClaimVerdict, review: Review | None, end: int) -> None:
        evaluation = claim_evaluation(claim)
        name = evaluation.pop("name")
        span.add_event(EVALUATION_EVENT, _event(name, evaluation), timestamp=end)
        self.annotate(span, name, "LLM", evaluation)
        if review is not None:
            agreed = {"agree": 1.0, "disagree": 0.0}.get(review.decision)
            result = {"label": review.label or review.decision, "explanation": review.note, "score": agreed}
            self.annotate(
                span,
                "human_review",
                "HUMAN",
                result,
                reviewer=review.reviewer,
                decision=review.decision,
                engine_label=review.engine_label,
            )
            self.summary.human += 1


def _event(name: str, result: dict[str, Any]) -> dict[str, Any]:
    values = {
        "gen_ai.evaluation.name": name,
        "gen_ai.evaluation.score.label": result.get("label"),
        "gen_ai.evaluation.score.value": result.get("score"),
        "gen_ai.evaluation.explanation": result.get("explanation"),
    }
    return {k: v for k, v in values.items() if v is not None}


def _headers() -> dict[str, str]:
    key = os.environ.get("PHOENIX_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def export_to_phoenix(path: Path, *, url: str = DEFAULT_PHOENIX_URL, project: str = "markov-debate") -> ExportSummary:
    """Send a finished log's traces to Phoenix at `url` (OTLP/HTTP at `url`/v1/traces), then its annotations."""
    require_extra("otel", "debate export phoenix")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    base = url.rstrip("/")
    summary = ExportSummary()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "markov-debate", "openinference.project.name": project})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=_headers())))
    exporter = _Exporter(provider, summary)
    try:
        for item in read_exportable(path, summary.skipped):
            exporter.item(item)
    finally:
        if not provider.force_flush():
            raise UsageError(f"{base}: the spans could not all be sent (is Phoenix running there?)")
        provider.shutdown()
    summary.annotations = _post_annotations(base, exporter.annotations)
    return summary


def _post(client: httpx.Client, base: str, chunk: list[dict[str, Any]]) -> httpx.Response:
    """One batch of annotations; Phoenix ingests spans asynchronously, so a span it has not stored yet is waited
    for (a 404 naming missing spans), up to about 10 s."""
    for _ in range(20):
        try:
            response = client.post("/v1/span_annotations", params={"sync": "true"}, json={"data": chunk})
        except httpx.HTTPError as exc:
            raise UsageError(f"{base}: cannot send annotations ({exc})") from exc
        if response.status_code != 404:
            return response
        time.sleep(0.5)
    return response


def _post_annotations(base: str, annotations: list[dict[str, Any]]) -> int:
    sent = 0
    with httpx.Client(base_url=base, headers=_headers(), timeout=30) as client:
        for start in range(0, len(annotations), _ANNOTATIONS_PER_REQUEST):
            chunk = annotations[start : start + _ANNOTATIONS_PER_REQUEST]
            response = _post(client, base, chunk)
            if response.status_code >= 400:
                raise UsageError(f"{base}/v1/span_annotations answered {response.status_code}: {response.text[:200]}")
            sent += len(chunk)
    return sent
