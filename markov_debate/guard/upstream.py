"""The endpoint the guard stands in front of: chat completions (whole, or streamed as server-sent events) and the
model list, each a typed UpstreamError when it cannot be had."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import httpx

__all__ = ["StreamEvent", "Upstream", "UpstreamError", "answer_texts"]

Kind = Literal["down", "status", "malformed"]


class UpstreamError(Exception):
    """down: no answer (connection refused, timeout); status: it answered with an error status (passed on to the
    caller as it was); malformed: a success status whose body is not a chat completion."""

    def __init__(self, kind: Kind, message: str, *, status: int = 502, body: bytes | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.body = body


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed answer: its raw bytes (passed on as they came) and its chunk, when it has one."""

    raw: bytes
    chunk: dict[str, Any] | None
    done: bool = False


def answer_texts(completion: Any) -> list[str | None]:
    """Each choice's text (None for a choice without text: tool calls only).

    Raises:
        UpstreamError: not a chat completion (kind malformed).
    """
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        raise UpstreamError("malformed", "the upstream's reply is not a chat completion (no `choices` list)")
    if not completion["choices"]:
        raise UpstreamError("malformed", "the upstream's reply has no choices")
    texts: list[str | None] = []
    for n, choice in enumerate(completion["choices"]):
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise UpstreamError("malformed", f"the upstream's reply has no message in choices[{n}]")
        content = message.get("content")
        texts.append(content if isinstance(content, str) else None)
    return texts


class Upstream:
    """One connection pool to the upstream, shared by every request."""

    def __init__(self, base_url: str, *, key: str | None, timeout_s: float, connections: int = 256) -> None:
        self._base = base_url.rstrip("/")
        self._key = key
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self._client = httpx.AsyncClient(timeout=timeout, limits=limits)

    def _headers(self, auth: str | None, request_id: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "x-request-id": request_id}
        token = f"Bearer {self._key}" if self._key else auth
        if token:
            headers["authorization"] = token
        return headers

    async def complete(self, body: dict[str, Any], *, auth: str | None, request_id: str) -> dict[str, Any]:
        """The whole completion."""
        try:
            response = await self._client.post(
                f"{self._base}/chat/completions", content=_json(body), headers=self._headers(auth, request_id)
            )
        except httpx.HTTPError as exc:
            raise UpstreamError("down", f"the upstream did not answer: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise UpstreamError(
                "status",
                f"the upstream answered {response.status_code}",
                status=response.status_code,
                body=response.content,
            )
        try:
            completion = response.json()
        except ValueError as exc:
            raise UpstreamError("malformed", f"the upstream's reply is not JSON: {exc}") from exc
        answer_texts(completion)
        return dict(completion)

    async def stream(self, body: dict[str, Any], *, auth: str | None, request_id: str) -> AsyncIterator[StreamEvent]:
        """The completion's events as they come; the last is `done` (the upstream's `[DONE]`)."""
        request = self._client.build_request(
            "POST", f"{self._base}/chat/completions", content=_json(body), headers=self._headers(auth, request_id)
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise UpstreamError("down", f"the upstream did not answer: {type(exc).__name__}: {exc}") from exc
        try:
            if response.status_code >= 400:
                content = await response.aread()
                raise UpstreamError(
                    "status",
                    f"the upstream answered {response.status_code}",
                    status=response.status_code,
                    body=content,
                )
            async for event in _events(response):
                yield event
        except httpx.HTTPError as exc:
            raise UpstreamError("down", f"the upstream's stream broke: {type(exc).__name__}: {exc}") from exc
        finally:
            await response.aclose()

    async def models(self, *, auth: str | None, request_id: str) -> tuple[int, bytes]:
        """The upstream's model list, status and body as they are."""
        try:
            response = await self._client.get(f"{self._base}/models", headers=self._headers(auth, request_id))
        except httpx.HTTPError as exc:
            raise UpstreamError("down", f"the upstream did not answer: {type(exc).__name__}: {exc}") from exc
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self._client.aclose()


def _json(body: dict[str, Any]) -> bytes:
    # ASCII with escapes: a lone surrogate the caller sent as \ud800 goes upstream as it came, not as an error here.
    return json.dumps(body).encode()


async def _events(response: httpx.Response) -> AsyncIterator[StreamEvent]:
    """Server-sent events, one `data:` payload each; a stream that ends without `[DONE]` is malformed."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if line:
            lines.append(line)
            continue
        if not lines:
            continue
        event = _event(lines)
        lines = []
        if event is not None:
            yield event
            if event.done:
                return
    if lines and (event := _event(lines)) is not None:
        yield event
        if event.done:
            return
    raise UpstreamError("malformed", "the upstream's stream ended without [DONE]")


def _event(lines: list[str]) -> StreamEvent | None:
    data = "\n".join(line[5:].lstrip() for line in lines if line.startswith("data:"))
    raw = ("\n".join(lines) + "\n\n").encode()
    if not data:
        return None  # a comment or keep-alive
    if data.strip() == "[DONE]":
        return StreamEvent(raw, None, done=True)
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise UpstreamError("malformed", f"the upstream's stream has an event that is not JSON: {exc}") from exc
    if not isinstance(chunk, dict):
        raise UpstreamError("malformed", "the upstream's stream has an event that is not an object")
    return StreamEvent(raw, chunk)
