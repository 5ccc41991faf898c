"""Traces of verification as OpenTelemetry spans, with evaluation results as first-class telemetry (extra `otel`).

One trace per verified response: spans for extraction, prefilters, each claim (its evidence, its debate, each
round and turn of the chain) and each model call. Attributes follow two conventions at once, so that any OTLP
backend and Phoenix both read them natively:

- OpenTelemetry GenAI: `gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`, ... on model
  calls, and each claim's and response's verdict as a `gen_ai.evaluation.result` event (name, score label, score
  value, explanation);
- OpenInference: `openinference.span.kind` (CHAIN, RETRIEVER, GUARDRAIL, AGENT, EVALUATOR, LLM), `input.value`,
  `output.value`, `llm.*` token counts and messages, `retrieval.documents.*`; the resource's
  `openinference.project.name` names the Phoenix project.

Off unless configured (`TelemetryConfig.endpoint`, `--telemetry.endpoint URL`, or the standard
OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): then every helper here returns at its first
line, and nothing of OpenTelemetry's SDK is imported. The tracer provider is our own, never the global one:
autogen-core traces its runtime through the global provider, and its message-routing spans would bury the debate's.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from debate.errors import UsageError
from debate.extras import require_extra

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "SPAN_KIND",
    "SpanGroup",
    "SpanKind",
    "active",
    "configure",
    "current_context",
    "documents",
    "evaluation",
    "resolve_endpoint",
    "set_attributes",
    "shutdown",
    "span",
]

log = logging.getLogger(__name__)

SpanKind = Literal["CHAIN", "RETRIEVER", "GUARDRAIL", "AGENT", "EVALUATOR", "LLM", "TOOL"]
"""OpenInference span kinds used here."""

SPAN_KIND = "openinference.span.kind"
EVALUATION_EVENT = "gen_ai.evaluation.result"
AttributeValue = str | bool | int | float | Sequence[str]

_MAX_TEXT = 16_000
"""Longest text put in one attribute: a whole document as `input.value` would make every span heavy."""


class _Tracing:
    def __init__(self, provider: TracerProvider, endpoint: str, project: str) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("markov_debate")
        self.endpoint = endpoint
        self.project = project


_STATE: _Tracing | None = None
_LOCK = threading.Lock()


def resolve_endpoint(endpoint: str | None) -> str | None:
    """The OTLP/HTTP traces URL: the given base URL, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is), else
    OTEL_EXPORTER_OTLP_ENDPOINT; a base URL gets `/v1/traces` as the OTLP spec says. None: tracing stays off."""
    if endpoint is None:
        exact = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if exact:
            return exact
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
    if endpoint is None:
        return None
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"OTLP endpoint {endpoint!r} is not an http(s) URL (the exporter speaks OTLP/HTTP)")
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def configure(
    endpoint: str | None = None, *, project: str = "markov-debate", exporter: SpanExporter | None = None
) -> bool:
    """Start tracing in this process (idempotent: a second call keeps the first set-up). `exporter` replaces the
    OTLP exporter (tests, or a user's own). Returns whether tracing is on."""
    global _STATE
    with _LOCK:
        if _STATE is not None:
            return True
        url = resolve_endpoint(endpoint) if exporter is None else "custom"
        if url is None:
            return False
        require_extra("otel", f"tracing to {url}")
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=url)
        resource = Resource.create({"service.name": "markov-debate", "openinference.project.name": project})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        _STATE = _Tracing(provider, url, project)
        log.info("tracing to %s (project %s)", url, project)
        return True


def shutdown() -> None:
    """Flush what is buffered and stop tracing (a later `configure` starts afresh)."""
    global _STATE
    with _LOCK:
        state, _STATE = _STATE, None
    if state is not None:
        state.provider.force_flush()
        state.provider.shutdown()


def flush() -> None:
    """Send what is buffered now (the end of a batch, before the process may be killed)."""
    if _STATE is not None:
        _STATE.provider.force_flush()


def active() -> bool:
    """Whether tracing is on in this process."""
    return _STATE is not None


def current_context() -> Context | None:
    """The active trace context (to parent spans made later in other tasks), or None when tracing is off."""
    if _STATE is None:
        return None
    from opentelemetry import context

    return context.get_current()


def _clip(value: str) -> str:
    return value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT] + f"... [{len(value) - _MAX_TEXT} chars cut]"


def _clean(attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """OTel takes str, bool, int, float and their sequences; None is dropped, mappings become JSON."""
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str):
            out[key] = _clip(value)
        elif isinstance(value, bool | int | float):
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = _clip(json.dumps(value, default=str, ensure_ascii=False))
        else:
            out[key] = [str(v) for v in value]
    return out


@contextmanager
def span(
    name: str, kind: SpanKind, attributes: Mapping[str, Any] | None = None, *, parent: Context | None = None
) -> Iterator[Span | None]:
    """A span made current for the block (None when tracing is off). An exception leaving the block is recorded
    on the span and re-raised; a cancellation is recorded as such."""
    if _STATE is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    with _STATE.tracer.start_as_current_span(
        name,
        context=parent,
        attributes=_clean({SPAN_KIND: kind, **(attributes or {})}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.record_exception(exc)
            current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
            raise


def set_attributes(current: Span | None, attributes: Mapping[str, Any]) -> None:
    """Add attributes to a span from `span` (no-op for None)."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def evaluation(current: Span | None, *, name: str, label: str, score: float | None, explanation: str | None) -> None:
    """Record a verdict as a `gen_ai.evaluation.result` event on `current` (GenAI semantic conventions)."""
    if current is None:
        return
    current.add_event(
        EVALUATION_EVENT,
        _clean(
            {
                "gen_ai.evaluation.name": name,
                "gen_ai.evaluation.score.label": label,
                "gen_ai.evaluation.score.value": score,
                "gen_ai.evaluation.explanation": explanation,
            }
        ),
    )


def documents(evidence: Sequence[Any]) -> dict[str, Any]:
    """Evidence items (text, source, score) as OpenInference retrieval documents."""
    attributes: dict[str, Any] = {"output.value": f"{len(evidence)} evidence item(s)"}
    for index, item in enumerate(evidence):
        prefix = f"retrieval.documents.{index}.document"
        attributes[f"{prefix}.content"] = item.text
        attributes[f"{prefix}.id"] = item.source
        attributes[f"{prefix}.score"] = item.score
    return attributes


class SpanGroup:
    """Parent spans opened on demand by work running in other tasks (the rounds of one debate: its turns run as
    autogen agents, each in a task of its own): each is opened under the context current when the group was made,
    and ends with its last child."""

    def __init__(self) -> None:
        self._parent = current_context()
        self._open: dict[str, Span] = {}
        self._ended: dict[str, int] = {}

    @contextmanager
    def child(
        self, group: str, group_attributes: Mapping[str, Any], name: str, kind: SpanKind, attributes: Mapping[str, Any]
    ) -> Iterator[Span | None]:
        """A span `name` under the group span `group` (opened with `group_attributes` the first time)."""
        if _STATE is None:
            yield None
            return
        from opentelemetry.trace import set_span_in_context

        parent = self._open.get(group)
        if parent is None:
            parent = _STATE.tracer.start_span(
                group, context=self._parent, attributes=_clean({SPAN_KIND: "CHAIN", **group_attributes})
            )
            self._open[group] = parent
        with span(name, kind, attributes, parent=set_span_in_context(parent)) as current:
            yield current
        self._ended[group] = time.time_ns()

    def close(self) -> None:
        """End every group span at its last child's end."""
        for group, opened in self._open.items():
            opened.end(end_time=self._ended.get(group))
        self._open.clear()
