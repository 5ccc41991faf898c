"""The endpoint the guard stands in front of: chat completions (whole, or streamed as server-sent events) and the
model list, each a typed UpstreamError when it cannot be had."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from debate.errors import ModelError
from debate.llm import env_proxy

__all__ = ["StreamEvent", "Upstream", "UpstreamError", "answer_texts"]

Cause = Literal["down", "status", "malformed"]


class UpstreamError(ModelError):
    """The guarded model's answer could not be had. `cause` down: no answer (connection refused, timeout); status:
    it answered with an error status (passed on to the caller as it was); malformed: a success status whose body is
    not a chat completion."""

    def __init__(self, cause: Cause, message: str, *, status: int = 502, body: bytes | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.transient = cause != "status"
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
    """One connection pool to the upstream, shared by every request (aiohttp: under many concurrent requests its
    pool costs a fraction of what httpx's did, which was most of the guard's own time per request)."""

    def __init__(
        self,
        base_url: str,
        *,
        key: str | None,
        timeout_s: float,
        connections: int = 256,
        max_answer_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._key = key
        self._limit = max_answer_bytes
        """An answer's bytes at most (whole or streamed): each is held whole to be verified, so this bounds a
        request's memory (a 20 MB answer raised the guard's RSS by 170 MB, which Python's allocator kept)."""
        # Per connect and per read, as a client library's timeout usually is: a long stream that keeps sending is
        # not cut, one that stalls for timeout_s is.
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(timeout_s, 10.0), sock_read=timeout_s)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        # HTTP(S)_PROXY / NO_PROXY apply as they do to the engine's own model client (per request, aiohttp's
        # trust_env doubled the guard's time).
        self._proxy = env_proxy(self._base)

    @property
    def _client(self) -> aiohttp.ClientSession:
        # Made on first use: an aiohttp session belongs to the running loop.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._connections, limit_per_host=self._connections)
            # No cookie jar: one session serves every caller, and a cookie the upstream sets for one (a session,
            # a load balancer's affinity) must not go out with the next caller's request.
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    def _headers(self, auth: str | None, request_id: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "x-request-id": request_id}
        token = f"Bearer {self._key}" if self._key else auth
        if token:
            headers["authorization"] = token
        return headers

    async def complete(self, body: dict[str, Any], *, auth: str | None, request_id: str) -> dict[str, Any]:
        """The whole completion."""
        try:
            async with self._client.post(
                f"{self._base}/chat/completions",
                data=_json(body),
                headers=self._headers(auth, request_id),
                proxy=self._proxy,
            ) as response:
                status, content = response.status, await _read(response, self._limit)
        except _DOWN as exc:
            raise UpstreamError("down", f"the upstream did not answer: {_said(exc)}") from exc
        if status >= 400:
            raise UpstreamError("status", f"the upstream answered {status}", status=status, body=content)
        try:
            completion = json.loads(content)
        except ValueError as exc:
            raise UpstreamError("malformed", f"the upstream's reply is not JSON: {exc}") from exc
        answer_texts(completion)
        return dict(completion)

    async def stream(self, body: dict[str, Any], *, auth: str | None, request_id: str) -> AsyncIterator[StreamEvent]:
        """The completion's events as they come; the last is `done` (the upstream's `[DONE]`)."""
        try:
            response = await self._client.post(
                f"{self._base}/chat/completions",
                data=_json(body),
                headers=self._headers(auth, request_id),
                proxy=self._proxy,
            )
        except _DOWN as exc:
            raise UpstreamError("down", f"the upstream did not answer: {_said(exc)}") from exc
        try:
            if response.status >= 400:
                content = await response.read()
                raise UpstreamError(
                    "status", f"the upstream answered {response.status}", status=response.status, body=content
                )
            async for event in _events(response, self._limit):
                yield event
        except _DOWN as exc:
            raise UpstreamError("down", f"the upstream's stream broke: {_said(exc)}") from exc
        finally:
            # Back to the pool when read to the end; closed when left part-way (the caller went away).
            response.release()

    async def models(self, *, auth: str | None, request_id: str) -> tuple[int, bytes]:
        """The upstream's model list, status and body as they are."""
        try:
            async with self._client.get(
                f"{self._base}/models", headers=self._headers(auth, request_id), proxy=self._proxy
            ) as response:
                return response.status, await response.read()
        except _DOWN as exc:
            raise UpstreamError("down", f"the upstream did not answer: {_said(exc)}") from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


# Everything that means no (whole) answer came: refused, reset, a stalled read (aiohttp's timeouts are TimeoutError).
_DOWN = (aiohttp.ClientError, TimeoutError)


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _json(body: dict[str, Any]) -> bytes:
    # ASCII with escapes: a lone surrogate the caller sent as \ud800 goes upstream as it came, not as an error here.
    return json.dumps(body).encode()


def _too_large(limit: int) -> UpstreamError:
    return UpstreamError("malformed", f"the upstream's answer is over {limit:,} bytes, more than the guard verifies")


async def _read(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, refused once it passes `limit` bytes (an error status's body too: it is passed on)."""
    parts, size = [], 0
    async for data in response.content.iter_any():
        size += len(data)
        if size > limit:
            raise _too_large(limit)
        parts.append(data)
    return b"".join(parts)


async def _lines(response: aiohttp.ClientResponse, limit: int) -> AsyncIterator[str]:
    """The body's lines as they arrive (\n, \r\n or \r ends one), decoded as UTF-8 with replacement, as a
    stream's text is; no length limit on a line (one event may carry a long chunk), `limit` bytes in all."""
    pending, size = b"", 0
    async for data in response.content.iter_any():
        size += len(data)
        if size > limit:
            raise _too_large(limit)
        pending += data
        # A \r last may be the first half of a \r\n split across reads: it waits for the next read.
        cut = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
        *complete, rest = _split_lines(pending[:cut])
        pending = rest + pending[cut:]
        for line in complete:
            yield line.decode("utf-8", "replace")
    for line in _split_lines(pending) if pending else ():
        yield line.decode("utf-8", "replace")


def _split_lines(data: bytes) -> list[bytes]:
    """`data` split at each \r\n, \n or \r (the last piece is what follows the last line break)."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


async def _events(response: aiohttp.ClientResponse, limit: int) -> AsyncIterator[StreamEvent]:
    """Server-sent events, one `data:` payload each; a stream that ends without `[DONE]` is malformed."""
    lines: list[str] = []
    async for line in _lines(response, limit):
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
