"""What one HTTP attempt to an endpoint can end in, as our own exceptions made straight from the response: an
HTTP status (with its status, body, headers and Retry-After), no answer (refused, reset, timed out), or a 200 that
is not a usable completion. They never leave the model client: it retries the transient ones (debate.retry) and
turns the rest into the DebateErrors of debate.errors, with a hint from debate.llm._diagnosis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from debate.errors import EndpointConnectionError, EndpointHTTPError, MalformedReplyError
from debate.retry import TRANSIENT_STATUS, retry_after_seconds

__all__ = [
    "connection_problem",
    "describe",
    "first_choice",
    "headers_of",
    "http_error",
    "is_retryable",
    "parse_body",
]


def http_error(status: int, body: bytes, headers: Mapping[str, str], *, method: str, url: str) -> EndpointHTTPError:
    """The error an HTTP error status is: its body read for the detail (an OpenAI-style {"error": {...}} unwrapped)
    and its headers for Retry-After."""
    lowered = {key.lower(): value for key, value in headers.items()}
    text = body.decode(errors="replace").strip()
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        detail: object = text
        message = text or f"Error code: {status}"
    else:
        detail = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        message = f"Error code: {status} - {parsed}"
    return EndpointHTTPError(
        status,
        message,
        body=body,
        headers=lowered,
        detail=detail,
        retry_after=retry_after_seconds(lowered),
        transient=status in TRANSIENT_STATUS,
        method=method,
        url=url,
    )


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors, 5xx and malformed 200s are transient; every other error is final."""
    if isinstance(exc, MalformedReplyError | EndpointConnectionError):
        return True
    return isinstance(exc, EndpointHTTPError) and exc.status in TRANSIENT_STATUS


def headers_of(exc: BaseException) -> Mapping[str, str] | None:
    """The response headers of an HTTP error (for Retry-After), else None."""
    return exc.headers if isinstance(exc, EndpointHTTPError) else None


def describe(exc: BaseException) -> str:
    """One line saying what went wrong, for messages and the retry log."""
    if isinstance(exc, MalformedReplyError):
        return f"malformed reply: {exc}"
    if isinstance(exc, EndpointHTTPError):
        return f"HTTP {exc.status}: {exc.message}"
    if isinstance(exc, EndpointConnectionError):
        return exc.reason
    return f"{type(exc).__name__}: {exc}"


def first_choice(raw: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """The completion and its first choice, or MalformedReplyError saying what is wrong with the body."""
    if not isinstance(raw, dict):
        raise MalformedReplyError(f"the endpoint answered 200 with JSON that is not an object: {str(raw)[:80]!r}")
    if "error" in raw:
        error = raw["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise MalformedReplyError(f"the endpoint answered 200 with an error: {message}")
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReplyError("the endpoint answered 200 with no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        raise MalformedReplyError(f"the reply has no content{f' (refusal: {refusal})' if refusal else ''}")
    return raw, choice


def parse_body(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        shown = body[:80].decode(errors="replace")
        raise MalformedReplyError(f"the endpoint answered 200 with a body that is not JSON: {shown!r}") from exc


def connection_problem(exc: aiohttp.ClientError, where: str) -> str:
    """A connection failure in plain words, without aiohttp's internals (`ssl:default`, the connector's repr)."""
    os_error = getattr(exc, "os_error", None)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"host not found: {where}"
    if isinstance(os_error, ConnectionRefusedError) or (isinstance(os_error, OSError) and os_error.errno == 111):
        return f"connection refused by {where}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {where} ({os_error.strerror if isinstance(os_error, OSError) else 'no route'})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"{where} closed the connection before replying"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the reply from {where} was cut off"
    if isinstance(exc, aiohttp.ClientOSError) and exc.strerror:
        return f"{exc.strerror.lower()} ({where})"
    return f"connection to {where} failed ({type(exc).__name__})"
