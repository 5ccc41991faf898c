"""What an endpoint's failure most likely means, said as a DebateError with a hint in both vocabularies (the Python
API's and the command line's): nothing listening, a URL that is not an OpenAI API root, a refused key, a model the
server does not serve (with the closest one it does), a context that is too long."""

from __future__ import annotations

import difflib
import ipaddress
from urllib.parse import urlparse

from debate.errors import DebateError, EndpointHTTPError
from debate.llm._base import ContextTooLongError, ModelRequestError, ModelUnavailableError
from debate.llm._transport import describe, is_retryable

__all__ = [
    "KEY_HINT",
    "MODEL_HINT",
    "URL_HINT",
    "chat_failure",
    "context_overflow",
    "format_rejected",
    "is_hosted",
    "listing_failure",
    "nothing_answers",
    "refused_key",
]

KEY_HINT = ("set ModelConfig.api_key (or OPENAI_API_KEY)", "pass --model.api-key (or set OPENAI_API_KEY)")
URL_HINT = ("check ModelConfig.base_url (or OPENAI_BASE_URL)", "check --model.base-url (or OPENAI_BASE_URL)")
MODEL_HINT = ("set ModelConfig.model (or DEBATE_MODEL)", "pass --model.model (or set DEBATE_MODEL)")


def is_hosted(base_url: str) -> bool:
    """True for an endpoint on the public internet: a dotted host name that is not local (localhost, *.local,
    *.internal, *.lan), or a public IP address. Single-label names (a compose service such as `vllm`) and loopback
    or private addresses are local servers, which commonly need no key."""
    host = (urlparse(base_url).hostname or "").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." in host and not host.endswith((".local", ".localhost", ".internal", ".lan", ".home.arpa"))
    return address.is_global


def format_rejected(exc: EndpointHTTPError) -> bool:
    """The endpoint refused the structured-output mode (a lower one may work)."""
    return exc.status in (400, 422) and exc.mentions("response_format", "json_schema", "schema", "json")


def context_overflow(exc: EndpointHTTPError) -> bool:
    """The prompt does not fit the model's context window."""
    return (
        exc.status in (400, 413, 422)
        and exc.mentions("context")
        and exc.mentions("length", "window", "exceed", "too long", "maximum", "tokens")
    )


def nothing_answers(base: str, exc: BaseException, attempts: int) -> DebateError:
    down = ModelUnavailableError(f"nothing answers at {base} ({describe(exc)} after {attempts} attempts)")
    api, cli = URL_HINT
    return down.with_hint(f"is the server running? {api}", f"is the server running? {cli}")


def refused_key(exc: EndpointHTTPError, base: str, *, has_key: bool) -> DebateError:
    said = "refused the API key" if has_key else "wants an API key and none was set"
    return ModelRequestError(f"{base} {said} ({describe(exc)})", status=exc.status).with_hint(*KEY_HINT)


def _wrong_path(base: str) -> DebateError:
    """A 404 on GET /models: the base URL is not an OpenAI API root (most servers put it under /v1)."""
    guess = f"; most servers serve it under /v1: try {base}/v1" if not base.endswith("/v1") else ""
    error = ModelRequestError(
        f"{base}/models answered 404: {base} is not an OpenAI-compatible API root{guess}", status=404
    )
    return error.with_hint(*URL_HINT)


def listing_failure(
    exc: EndpointHTTPError, base: str, *, model: str | None, has_key: bool, attempts: int
) -> DebateError | None:
    """Why GET /models failed, or None when the configured model can be used as given (an endpoint without a
    model list, as some proxies are)."""
    if exc.status in (401, 403):
        return refused_key(exc, base, has_key=has_key)
    if exc.status == 404 and model is None:
        return _wrong_path(base.rstrip("/"))
    if is_retryable(exc):
        return ModelUnavailableError(f"{base}: {describe(exc)} after {attempts} attempts")
    if model is None:
        error = ModelRequestError(f"listing models at {base} failed ({describe(exc)})", status=exc.status)
        return error.with_hint(*MODEL_HINT)
    return None


def _model_refused(exc: EndpointHTTPError, base: str, model: str, served: list[str]) -> DebateError | None:
    """A 404 (or a 400 naming the model) on a chat call when the endpoint's list lacks our model: the model
    name is wrong; name what it serves and the closest match."""
    if not served or model in served or f"{model}:latest" in served:
        return None
    if not (exc.status == 404 or (exc.status == 400 and exc.mentions(model.lower()))):
        return None
    listed = ", ".join(served[:12])
    close = difflib.get_close_matches(model, served, n=1, cutoff=0.4)
    error = ModelRequestError(
        f"{base} does not serve model {model!r} ({describe(exc)}); it serves: {listed}", status=exc.status
    )
    return error.with_hint(
        (f"did you mean {close[0]!r}? " if close else "") + MODEL_HINT[0],
        (f"did you mean --model.model {close[0]}? " if close else "") + MODEL_HINT[1],
    )


def chat_failure(
    exc: EndpointHTTPError, base: str, *, model: str, served: list[str], has_key: bool, attempts: int
) -> DebateError:
    """What a failed chat call means, most specific first."""
    if is_retryable(exc):
        return ModelUnavailableError(f"{base}: {describe(exc)} after {attempts} attempts")
    refused = _model_refused(exc, base.rstrip("/"), model, served)
    if refused is not None:
        return refused
    if exc.status in (401, 403):
        return refused_key(exc, base, has_key=has_key)
    error = ContextTooLongError if context_overflow(exc) else ModelRequestError
    return error(f"{base}: {describe(exc)}", status=exc.status)
