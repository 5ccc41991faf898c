"""A scripted ChatClient for tests: it records every call and fails loudly when its script runs out."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from debate.llm import ChatRequest, ChatResponse, TokenLogprob, TopLogprob, current_item
from debate.rollup import claim_ratios, response_score, roll_up
from debate.types import (
    ClaimLabel,
    ClaimVerdict,
    ExtractionInfo,
    Failure,
    Report,
    ReportVerdict,
    RunMeta,
    Usage,
)

__all__ = [
    "SchemaChatClient",
    "ScriptExhaustedError",
    "ScriptedChatClient",
    "Step",
    "sample_report",
    "yes_no_response",
]


def yes_no_response(p_yes: float) -> ChatResponse:
    """A one-token YES/NO answer with logprobs, P(YES) = `p_yes`: what a grounding call gets from an endpoint."""
    top = [TopLogprob(token="YES", logprob=math.log(p_yes)), TopLogprob(token="NO", logprob=math.log(1 - p_yes))]
    first = top[0] if p_yes >= 0.5 else top[1]
    return ChatResponse(
        text=first.token,
        usage=Usage(llm_calls=1),
        model="scripted",
        latency_s=0.0,
        logprobs=[TokenLogprob(token=first.token, logprob=first.logprob, top=top)],
    )


Step = str | ChatResponse | BaseException | Callable[[ChatRequest], "str | ChatResponse"]
"""A scripted reply: its text, a whole response (e.g. with logprobs), an exception to raise, or a function of the
request returning either."""


class ScriptExhaustedError(AssertionError):
    """More model calls happened than the script foresaw."""


@dataclass
class _Call:
    request: ChatRequest
    reply: str | None
    item: str | None = field(default_factory=current_item)
    """The item the call was made for (see debate.llm.item_scope)."""


class ScriptedChatClient:
    """Answers calls from a fixed script. A list is one script answered in call order; a mapping routes each call
    by its request's declared `purpose` (an exact key such as "debate:skeptic", else the part before the colon,
    "debate"), each purpose with its own script, so concurrent claims and stages cannot steal each other's
    replies; a key "<purpose>@<item id>" ("extract@b") scripts one item of a batch apart from the others. It never
    reads a prompt to choose. Either way it fails loudly when a script runs out."""

    def __init__(
        self,
        steps: Iterable[Step] | Mapping[str, Iterable[Step]],
        *,
        model: str = "scripted",
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        delay_s: float = 0.0,
    ) -> None:
        if isinstance(steps, Mapping):
            self._routes: dict[str, list[Step]] | None = {k: list(v) for k, v in steps.items()}
            self._steps: list[Step] = []
        else:
            self._routes = None
            self._steps = list(steps)
        self._model = model
        self._prompt_tokens = prompt_tokens
        self._completion_tokens = completion_tokens
        self._delay_s = delay_s
        self.calls: list[_Call] = []
        self.accepted: list[ChatResponse] = []
        """Responses the caller found usable."""
        self.closed = False
        self.in_flight = 0
        self.max_in_flight = 0
        """Most calls that were awaiting their reply at the same time."""

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def remaining(self) -> int:
        if self._routes is not None:
            return sum(len(v) for v in self._routes.values())
        return len(self._steps)

    def _script(self, request: ChatRequest) -> list[Step]:
        if self._routes is None:
            return self._steps
        purpose, family, item = request.purpose, request.purpose.split(":", 1)[0], current_item()
        keys = [f"{purpose}@{item}", f"{family}@{item}"] if item is not None else []
        for key in [*keys, purpose, family]:
            if key in self._routes:
                return self._routes[key]
        raise ScriptExhaustedError(f"no script for purpose {purpose!r} (scripted: {sorted(self._routes)})")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        script = self._script(request)
        if not script:
            self.calls.append(_Call(request, None))
            raise ScriptExhaustedError(
                f"call {len(self.calls)} ({request.purpose}) has no scripted reply; last user message:\n"
                f"{request.messages[-1].content[:500]}"
            )
        step = script.pop(0)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self._delay_s:
                await asyncio.sleep(self._delay_s)
        finally:
            self.in_flight -= 1
        if isinstance(step, BaseException):
            self.calls.append(_Call(request, None))
            raise step
        answer = step(request) if callable(step) else step
        if isinstance(answer, ChatResponse):
            self.calls.append(_Call(request, answer.text))
            return answer
        text = answer
        self.calls.append(_Call(request, text))
        return ChatResponse(
            text=text,
            usage=Usage(llm_calls=1, prompt_tokens=self._prompt_tokens, completion_tokens=self._completion_tokens),
            model=self._model,
            latency_s=self._delay_s,
            finish_reason="stop",
        )

    def purposes(self) -> list[str]:
        """The declared purpose of every call so far, in order."""
        return [c.request.purpose for c in self.calls]

    async def accept(self, response: ChatResponse) -> None:
        self.accepted.append(response)

    async def aclose(self) -> None:
        self.closed = True


class SchemaChatClient:
    """Answers any request from what the request itself declares, as pydantic-ai's TestModel does: a request with a
    JSON schema gets the simplest instance of that schema (checked with jsonschema before it is returned), a logprob
    request a one-token YES with P(YES) = `p_yes`, any other request `text`. `values` fixes a property wherever it
    appears by name (e.g. {"factuality": False}). Nothing is scripted, so it serves contract tests: a stage whose
    parser rejects the simplest reply its own schema allows is caught."""

    def __init__(self, *, values: Mapping[str, Any] | None = None, text: str = "None", p_yes: float = 0.9) -> None:
        self._values = dict(values or {})
        self._text = text
        self._p_yes = p_yes
        self.calls: list[_Call] = []
        self.accepted: list[ChatResponse] = []

    @property
    def model_name(self) -> str:
        return "schema"

    def instance(self, schema: Mapping[str, Any]) -> Any:
        """The simplest value `schema` admits (the first of an enum or anyOf, the minimum, required keys only)."""
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.instance(schema[key][0])
        kind = schema.get("type", "object")
        kind = kind[0] if isinstance(kind, list) else kind
        if kind == "object":
            properties: Mapping[str, Any] = schema.get("properties", {})
            return {
                name: self._values[name] if name in self._values else self.instance(properties.get(name, {}))
                for name in schema.get("required", list(properties))
            }
        if kind == "array":
            return [self.instance(schema.get("items", {})) for _ in range(max(1, schema.get("minItems", 1)))]
        if kind in ("integer", "number"):
            return schema.get("minimum", 0)
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return "a" * max(1, schema.get("minLength", 1))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if request.logprobs:
            response = yes_no_response(self._p_yes)
        else:
            text = self._text
            if request.response_schema is not None:
                import jsonschema  # here, not at import: the pytest plugin imports this module in every session

                value = self.instance(request.response_schema)
                jsonschema.validate(value, request.response_schema)
                text = json.dumps(value)
            response = ChatResponse(
                text=text,
                usage=Usage(llm_calls=1, prompt_tokens=10, completion_tokens=5),
                model="schema",
                latency_s=0.0,
                finish_reason="stop",
            )
        self.calls.append(_Call(request, response.text))
        return response

    async def accept(self, response: ChatResponse) -> None:
        self.accepted.append(response)

    async def aclose(self) -> None:
        """Nothing to close."""


def sample_report(labels: Iterable[ClaimLabel | None] = (), *, verdict: ReportVerdict | None = None) -> Report:
    """A small Report with one verified claim per label (None: a claim left unverifiable by a failure), for
    tests of code that reads reports; the verdict is the paper's any-false rollup unless given."""
    labels = list(labels)
    claims = [
        ClaimVerdict(
            claim_id=f"c{i}",
            text=f"claim {i}",
            status="verified" if label else "unverifiable",
            label=label,
            factual=None if label in (None, "not_enough_evidence") else label == "factual",
            error_severity=0 if label else None,
            evidence=[],
            debate=None,
            reason=None if label else "the endpoint was unavailable",
            failure=None if label else Failure(kind="model_unavailable", message="503", stage="debate", transient=True),
        )
        for i, label in enumerate(labels)
    ]
    rolled = roll_up(claims, rule="any-false")
    meta = RunMeta(
        model="scripted",
        base_url=None,
        embedded=False,
        config={},
        prompts={},
        seed=0,
        package_version="0",
        git_commit=None,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    return Report(
        task="general",
        question=None,
        response=" ".join(c.text + "." for c in claims),
        factual=rolled.factual,
        verdict=verdict or rolled.verdict,
        score=response_score(claims),
        rollup="any-false",
        ratios=claim_ratios(claims),
        extraction=ExtractionInfo(method="given"),
        claims=claims,
        usage=Usage(),
        elapsed_s=0.0,
        meta=meta,
    )
