"""What one HTTP attempt to an endpoint can end in, as our own exceptions made straight from the response: an
HTTP status (with its status, body, headers and Retry-After), no answer (refused, reset, timed out), or a 200 that
is not a usable completion. They never leave the model client: it retries the transient ones (debate.retry) and
turns the rest into the DebateErrors of debate.errors, with a hint from debate.llm.diagnosis."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from debate.retry import TRANSIENT_STATUS, retry_after_seconds

__all__ = [
    "EndpointConnectionError",
    "EndpointHTTPError",
    "MalformedReplyError",
    "TransportError",
    "describe",
    "headers_of",
    "is_retryable",
]


class TransportError(Exception):
    """One HTTP attempt failed."""


class EndpointHTTPError(TransportError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str], *, method: str, url: str) -> None:
        self.status = status
        """The HTTP status."""
        self.body = body
        """The response body, as sent (with any echoed key already redacted by the client)."""
        self.headers = {key.lower(): value for key, value in headers.items()}
        """The response headers, keys lower-cased."""
        self.retry_after = retry_after_seconds(self.headers)
        """Seconds the server asked us to wait (Retry-After, retry-after-ms), when it said."""
        self.method, self.url = method, url
        text = body.decode(errors="replace").strip()
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.detail: object = text
            self.message = text or f"Error code: {status}"
        else:
            # OpenAI-style servers wrap the error as {"error": {...}}; the inner object is the detail.
            self.detail = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
            self.message = f"Error code: {status} - {parsed}"
        super().__init__(self.message)

    def mentions(self, *words: str) -> bool:
        """Whether the error's message or detail names any of `words` (case-insensitive)."""
        text = (self.message + str(self.detail)).lower()
        return any(word in text for word in words)


class EndpointConnectionError(TransportError):
    """No answer: the connection was refused, reset or dropped mid-body, or the request timed out."""

    def __init__(self, *, method: str, url: str, timeout: bool, reason: str = "connection error") -> None:
        self.method, self.url, self.timeout = method, url, timeout
        self.reason = "request timed out" if timeout else reason
        """What went wrong in plain words (no transport internals such as aiohttp's `ssl:default`)."""
        super().__init__(self.reason)


class MalformedReplyError(TransportError):
    """A 200 whose body is not a usable chat completion (HTML, truncated JSON, an error object, no choices, no
    content): a fault of the endpoint or a proxy in front of it, so it is retried like a 5xx."""


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
