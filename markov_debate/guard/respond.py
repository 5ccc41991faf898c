"""What the caller receives: the completion with its `verification`, the `x-debate-*` headers, a blocked answer
replaced, the refusal of a closed failure, the events of a stream, and the OpenAI-shaped errors."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse, Response
from starlette.background import BackgroundTask

from markov_debate.guard.decide import Verification
from markov_debate.guard.upstream import StreamEvent, UpstreamError

__all__ = [
    "GuardJSON",
    "block_text",
    "blocked_events",
    "done_event",
    "error",
    "headers",
    "refusal",
    "stream_texts",
    "upstream_failed",
    "verification_event",
    "verified_completion",
    "worst",
]

_RANK = {"passed": 0, "annotated": 0, "passed-unverified": 1, "flagged": 2, "blocked": 3, "refused": 4}


class GuardJSON(JSONResponse):
    """JSON as ASCII with escapes: an upstream's answer may hold a lone surrogate (`\\ud800` is valid JSON, not
    UTF-8) or a NaN, which the caller gets back as the upstream sent them, not as a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def upstream_failed(exc: UpstreamError) -> Response:
    """An upstream's error status and body as they were; no answer or a malformed one as 502."""
    if exc.cause == "status":
        return Response(exc.body or b"", status_code=exc.status, media_type="application/json")
    kind = "upstream_unavailable" if exc.cause == "down" else "upstream_malformed"
    return error(502, str(exc), kind=kind)


def error(status: int, message: str, *, kind: str, param: str | None = None, retry: bool | None = None) -> Response:
    """An OpenAI-shaped error; `retry` sets x-should-retry, which the OpenAI clients obey."""
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    extra = {} if retry is None else {"x-should-retry": "true" if retry else "false"}
    return GuardJSON(body, status_code=status, headers=extra)


def refusal(found: Verification, *, background: BackgroundTask | None = None) -> Response:
    """A fail-closed answer: 503 with why and the verification; the OpenAI clients do not retry it (x-should-retry),
    since the same request would be sent upstream again. `background` runs once it is written."""
    message = f"the answer was not verified and the policy is fail-closed: {found.notes[-1]}"
    body = {
        "error": {"message": message, "type": "verification_unavailable", "param": None, "code": None},
        "verification": found.model_dump(mode="json"),
    }
    return GuardJSON(
        body, status_code=503, headers={**headers(found), "x-should-retry": "false"}, background=background
    )


def worst(found: Sequence[Verification]) -> Verification:
    """The verification the response's headers and top-level `verification` show: the strictest action."""
    return max(found, key=lambda v: _RANK[v.action])


def headers(found: Verification) -> dict[str, str]:
    """x-debate-* headers: what a proxy's logs and a client that ignores the body can read."""
    out = {
        "x-debate-request-id": found.request_id,
        "x-debate-status": found.status,
        "x-debate-action": found.action,
    }
    if found.verdict is not None:
        out["x-debate-verdict"] = found.verdict
    if found.risk is not None:
        out["x-debate-risk"] = found.risk
    if found.p_factual is not None:
        out["x-debate-p-factual"] = f"{found.p_factual:.4f}"
    return out


def block_text(template: str, found: Verification) -> str:
    reasons = "; ".join(found.reasons[:3]) or "high risk"
    return template.replace("{reasons}", reasons)


def verified_completion(
    completion: dict[str, Any], found: Sequence[Verification | None], template: str
) -> dict[str, Any]:
    """The completion with each checked choice's verification (and a blocked one's text replaced), and the
    strictest as the top-level `verification`."""
    # Only the top level and each choice's own keys are replaced: copies of those two levels leave `completion`
    # as it came (a deep copy cost the request path ~0.1 ms).
    out = {**completion, "choices": [dict(choice) for choice in completion["choices"]]}
    for choice, verification in zip(out["choices"], found, strict=True):
        if verification is None:
            continue
        if verification.action == "blocked":
            choice["message"] = {"role": "assistant", "content": block_text(template, verification)}
            choice["finish_reason"] = "content_filter"
        if len(found) > 1:
            choice["verification"] = verification.model_dump(mode="json")
    checked = [v for v in found if v is not None]
    if checked:
        out["verification"] = worst(checked).model_dump(mode="json")
    return out


def _sse(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def verification_event(first: dict[str, Any] | None, found: Verification) -> bytes:
    """The stream's last event before [DONE]: a chunk with no choices and the `verification`."""
    base = first or {}
    return _sse(
        {
            "id": base.get("id", found.request_id),
            "object": "chat.completion.chunk",
            "created": base.get("created", int(time.time())),
            "model": base.get("model", ""),
            "choices": [],
            "verification": found.model_dump(mode="json"),
        }
    )


def blocked_events(first: dict[str, Any] | None, text: str) -> list[bytes]:
    """What replaces a blocked streamed answer: its block message as one chunk, ended as filtered content."""
    base = first or {}
    chunk = {
        "id": base.get("id", "blocked"),
        "object": "chat.completion.chunk",
        "created": base.get("created", int(time.time())),
        "model": base.get("model", ""),
    }
    return [
        _sse(
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]}
        ),
        _sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}),
    ]


def done_event() -> bytes:
    return b"data: [DONE]\n\n"


def stream_texts(events: Sequence[StreamEvent]) -> dict[int, str]:
    """Each choice's text, joined from the events' deltas."""
    texts: dict[int, list[str]] = {}
    for event in events:
        for choice in (event.chunk or {}).get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            index = choice.get("index", 0)
            if isinstance(content, str) and isinstance(index, int):
                texts.setdefault(index, []).append(content)
    return {index: "".join(parts) for index, parts in texts.items()}
