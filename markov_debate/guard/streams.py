"""`stream: true`, two ways (the deployment's `--stream`):

- hold: the upstream's stream is read whole, the answer verified, then streamed to the caller: its events as they
  came (or, blocked, the block message as one chunk ending `content_filter`), then an event with no choices and the
  `verification`, then `[DONE]`. The caller waits for the verification before the first token, and the headers carry
  it (`x-debate-*`).
- pass: each event is passed on as it comes; the verification follows the last one. The caller reads the answer
  while it is checked, so nothing can be blocked: a risky answer under `block` is flagged for review instead, and
  the headers carry only the request id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from fastapi.responses import Response, StreamingResponse

from markov_debate.guard.core import Guard
from markov_debate.guard.decide import Verification
from markov_debate.guard.respond import (
    block_text,
    blocked_events,
    done_event,
    headers,
    refusal,
    stream_texts,
    upstream_failed,
    verification_event,
    worst,
)
from markov_debate.guard.settings import RouteSettings
from markov_debate.guard.sources import RequestText
from markov_debate.guard.trail import record_decision
from markov_debate.guard.upstream import StreamEvent, UpstreamError

__all__ = ["error_event", "stream_response"]

NOT_BUFFERED = {"x-accel-buffering": "no"}
"""Tells nginx (and proxies that follow it) to pass each event on as it comes, whatever `proxy_buffering` says."""

log = logging.getLogger("markov_debate.guard")


async def stream_response(
    guard: Guard,
    text: RequestText,
    chosen: RouteSettings,
    *,
    auth: str | None,
    request_id: str,
    caller: str,
    route: str | None,
) -> Response:
    """The streamed answer (see the module docstring); an upstream that fails before its first event is an error
    response, as for a whole answer."""
    events = guard.upstream.stream(text.forwarded, auth=auth, request_id=request_id)
    try:
        first = await anext(events)
    except UpstreamError as exc:
        log.warning("guard %s: %s", request_id, exc)
        return upstream_failed(exc)
    if guard.settings.stream == "hold":
        return await _held(guard, text, chosen, first, events, request_id=request_id, caller=caller, route=route)
    body = _passed(guard, text, chosen, first, events, request_id=request_id, caller=caller, route=route)
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"x-debate-request-id": request_id, **NOT_BUFFERED}
    )


async def _verify(
    guard: Guard,
    text: RequestText,
    chosen: RouteSettings,
    events: list[StreamEvent],
    *,
    request_id: str,
    caller: str,
    route: str | None,
) -> Verification:
    answers = stream_texts(events)
    indexes = sorted(answers) or [0]
    choices = [(n, answers.get(n)) for n in indexes]
    results = await guard.verify_choices(
        text, choices, request_id=request_id, chosen=chosen, stream=guard.settings.stream
    )
    for n, (found, report) in zip(indexes, results, strict=True):
        record_decision(guard.recorder, text, answers.get(n), found, report, caller=caller, route=route)
    return worst([found for found, _ in results])


async def _held(
    guard: Guard,
    text: RequestText,
    chosen: RouteSettings,
    first: StreamEvent,
    rest: AsyncIterator[StreamEvent],
    *,
    request_id: str,
    caller: str,
    route: str | None,
) -> Response:
    events = [first]
    try:
        if not first.done:
            async for event in rest:
                events.append(event)
                if event.done:
                    break
    except UpstreamError as exc:
        log.warning("guard %s: %s", request_id, exc)
        return upstream_failed(exc)
    finally:
        # The upstream's response goes back to the pool now, not when the collector finds the generator.
        await _close(rest)
    content = [e for e in events if not e.done]
    found = await _verify(guard, text, chosen, content, request_id=request_id, caller=caller, route=route)
    if found.action == "refused":
        return refusal(found)
    head = next((e.chunk for e in content if e.chunk is not None), None)
    if found.action == "blocked":
        chunks = blocked_events(head, block_text(guard.settings.block_message, found))
    else:
        chunks = [e.raw for e in content]

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        yield verification_event(head, found)
        yield done_event()

    return StreamingResponse(body(), media_type="text/event-stream", headers={**headers(found), **NOT_BUFFERED})


async def _passed(
    guard: Guard,
    text: RequestText,
    chosen: RouteSettings,
    first: StreamEvent,
    rest: AsyncIterator[StreamEvent],
    *,
    request_id: str,
    caller: str,
    route: str | None,
) -> AsyncIterator[bytes]:
    events: list[StreamEvent] = []
    try:
        event = first
        while not event.done:
            events.append(event)
            yield event.raw
            event = await anext(rest)
    except StopAsyncIteration:
        pass
    except UpstreamError as exc:
        # Part of the answer is out already: the caller learns that it broke off, and nothing is verified.
        log.warning("guard %s: %s (after %d events)", request_id, exc, len(events))
        yield error_event(str(exc), kind="upstream_malformed" if exc.cause == "malformed" else "upstream_unavailable")
        return
    finally:
        await _close(rest)
    found = await _verify(guard, text, chosen, events, request_id=request_id, caller=caller, route=route)
    yield verification_event(next((e.chunk for e in events if e.chunk is not None), None), found)
    yield done_event()


def error_event(message: str, *, kind: str = "upstream_unavailable") -> bytes:
    """An `error` event, which the OpenAI clients raise as an APIError: the fault's type as a whole answer's 502
    names it (the status is out already)."""
    return f"data: {json.dumps({'error': {'message': message, 'type': kind}})}\n\n".encode()


async def _close(events: AsyncIterator[StreamEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()
