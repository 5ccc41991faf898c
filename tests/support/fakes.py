"""A scripted OpenAI-compatible server on 127.0.0.1 (FastAPI + uvicorn in a thread) for fault injection.

Which scripted reply a request gets is decided by the purpose it declares (the X-Debate-Purpose header the engine's
client sends, e.g. "extract", "debate:skeptic", "grounding") and its site (X-Debate-Site, e.g. "c0:S1:1:trust#2" for
the second attempt of that turn), never by the prompt's wording: rewording a prompt cannot change which reply a test
gets. A route may still answer from what it is asked (a rule-based model that says false to a claim naming Lyon).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass
class Reply:
    """One scripted HTTP reply."""

    status: int = 200
    content: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    logprobs: list[dict[str, Any]] | None = None
    error_message: str = "scripted error"
    body: str | None = None
    """A raw 200 body sent as is (HTML, truncated JSON, ...) instead of a completion."""
    content_type: str = "application/json"
    hold: threading.Event | None = None
    """When set, the reply waits (up to 60 s) for this event: a writer kept busy for as long as a test needs."""
    usage: tuple[int, int] = (11, 7)
    """The prompt and completion tokens the reply reports."""
    stream_cut: bool = False
    """For a `stream: true` request: the stream ends without [DONE] (a connection cut mid-answer)."""
    stream_gap_s: float = 0.0
    """For a `stream: true` request: the pause before each content chunk (a model writing token by token)."""


@dataclass(frozen=True)
class Call:
    """What a route is given: the request's declared purpose, site and item, and its JSON body."""

    purpose: str
    site: str | None
    item: str | None
    body: dict[str, Any]

    @property
    def attempt(self) -> int:
        """Which attempt of a structured exchange this is (1, then 2 for the first re-ask, ...): the site's "#n"."""
        return int(self.site.rsplit("#", 1)[1]) if self.site and "#" in self.site else 1

    @property
    def asked(self) -> str:
        """The last user message: what a rule-based route may answer from."""
        return str(self.body["messages"][-1]["content"])


Route = Sequence[Reply] | Callable[[Call], Reply]
"""Replies given in order, or a function of the call."""


def completion(
    content: str,
    *,
    model: str = "fake-model",
    logprobs: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] = (11, 7),
) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


async def _sse(reply: Reply) -> AsyncIterator[bytes]:
    """The reply as an OpenAI stream: a role chunk, its content a few characters a chunk, a finish chunk, [DONE]."""
    base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": "fake-model"}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n".encode()

    yield event({"role": "assistant", "content": ""})
    for start in range(0, len(reply.content), 7):
        await asyncio.sleep(reply.stream_gap_s)
        yield event({"content": reply.content[start : start + 7]})
    if reply.stream_cut:
        return
    yield event({}, "stop")
    yield b"data: [DONE]\n\n"


class FakeOpenAI:
    """Answers /v1/chat/completions from a script (or a responder function) and records every request."""

    def __init__(
        self,
        script: list[Reply] | None = None,
        *,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        routes: Mapping[str, Route] | None = None,
        models: tuple[str, ...] = ("fake-model",),
        port: int = 0,
    ) -> None:
        """`port`: 0 for a free one; a given one lets a test start the server where a client already points.
        `routes` maps a purpose to its replies: "<purpose>@<item id>" and "<family>@<item id>" first (one item
        of a batch scripted apart), then the exact purpose ("debate:skeptic"), its family ("debate"), then "*". A
        request no route covers gets HTTP 599 and is listed in `unrouted`. `responder` answers every request alike
        (faults, delays); `script` gives replies in arrival order."""
        self.script = list(script or [])
        self.responder = responder
        self.routes: dict[str, deque[Reply] | Callable[[Call], Reply]] = {
            name: route if callable(route) else deque(route) for name, route in (routes or {}).items()
        }
        self.calls: list[Call] = []
        """Every chat request with its purpose and site, in arrival order."""
        self.unrouted: list[Call] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        """The headers of every chat request (lower-case names)."""
        self.request_times: list[float] = []
        self.models = models
        self._lock = threading.Lock()
        app = FastAPI()

        @app.get("/v1/models")
        async def list_models() -> dict[str, Any]:
            return {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": "x"} for m in self.models],
            }

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = json.loads(await request.body())
            headers = request.headers
            call = Call(
                headers.get("x-debate-purpose", ""), headers.get("x-debate-site"), headers.get("x-debate-item"), body
            )
            with self._lock:
                self.requests.append(body)
                self.calls.append(call)
                self.headers.append(dict(request.headers))
                self.request_times.append(time.monotonic())
                if self.routes:
                    reply = self._routed(call)
                elif self.responder is not None:
                    reply = self.responder(body)
                elif self.script:
                    reply = self.script.pop(0)
                else:
                    reply = Reply(status=599, error_message="fake server script exhausted")
            if reply.hold is not None:
                await asyncio.to_thread(reply.hold.wait, 60)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            if reply.body is not None:
                return Response(reply.body, status_code=reply.status, media_type=reply.content_type)
            if reply.status != 200:
                return JSONResponse(
                    {"error": {"message": reply.error_message, "type": "scripted", "code": reply.status}},
                    status_code=reply.status,
                    headers=reply.headers,
                )
            if body.get("stream") is True:
                return StreamingResponse(_sse(reply), media_type="text/event-stream", headers=reply.headers)
            body = completion(reply.content, logprobs=reply.logprobs, usage=reply.usage)
            return JSONResponse(body, headers=reply.headers)

        # At exit a reply still held (a test's endpoint that never answers) is cut after 2 s: the join below would
        # otherwise wait its 10 s for it, in every such test.
        self._server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=port, log_level="error", lifespan="off", timeout_graceful_shutdown=2
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def _routed(self, call: Call) -> Reply:
        family = call.purpose.split(":", 1)[0]
        keys = [f"{call.purpose}@{call.item}", f"{family}@{call.item}"] if call.item is not None else []
        route = next((self.routes[k] for k in (*keys, call.purpose, family, "*") if k in self.routes), None)
        if callable(route):
            return route(call)
        if route:
            return route.popleft()
        self.unrouted.append(call)
        return Reply(status=599, error_message=f"no scripted reply for purpose {call.purpose!r} (site {call.site})")

    @property
    def purposes(self) -> list[str]:
        """The purpose of every chat request, in arrival order."""
        return [c.purpose for c in self.calls]

    @property
    def base_url(self) -> str:
        sockets = self._server.servers[0].sockets
        port = sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
