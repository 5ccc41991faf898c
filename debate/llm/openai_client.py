"""The only module that talks to the OpenAI endpoint API. Retry for every model call lives here.

Requests go over one aiohttp connection pool sized from the model semaphore, with bodies encoded and decoded by
orjson into our own types: the SDK's own request path costs ~1.5-7 ms of CPU per call (its request transform and
httpx's pool bookkeeping), which caps a 2-core machine far below a fast endpoint's throughput. The SDK's semantics
are kept: its base-URL and auth headers (OPENAI_ORG_ID, OPENAI_PROJECT_ID), its error classes for every HTTP error
(RateLimitError, InternalServerError, ...; imported on the first error only, since `import openai` alone costs
0.4 s of start-up), Retry-After, and the same environment proxies. This is the only request path.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import ipaddress
import logging
import os
import time
import urllib.request
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import aiohttp
import orjson

from debate.config import ModelConfig, StructuredOutputMode
from debate.errors import DebateError, UsageError
from debate.llm.base import (
    ChatRequest,
    ChatResponse,
    ContextTooLongError,
    ModelRequestError,
    ModelUnavailableError,
    TokenLogprob,
    TopLogprob,
)
from debate.provenance import package_version
from debate.retry import TRANSIENT_STATUS, retrying
from debate.types import Usage

if TYPE_CHECKING:
    import openai  # noqa: TID251 - the one module allowed to

__all__ = ["MalformedReplyError", "OpenAIChatClient", "is_hosted", "is_retryable"]

log = logging.getLogger(__name__)

_STRUCTURED_FALLBACK: dict[StructuredOutputMode, StructuredOutputMode] = {
    "json_schema": "json_object",
    "json_object": "none",
}


class MalformedReplyError(Exception):
    """A 200 whose body is not a usable chat completion (HTML, truncated JSON, an error object, no choices, no
    content): a fault of the endpoint or a proxy in front of it, so it is retried like a 5xx."""


def _sdk() -> ModuleType:
    import openai  # noqa: TID251 - the one module allowed to

    return openai


def _sdk_http() -> ModuleType:
    """The HTTP library whose Request/Response the SDK's exceptions carry (httpx, or httpx2 in openai 3)."""
    exceptions = importlib.import_module("openai._exceptions")
    module: ModuleType = getattr(exceptions, "httpx2", None) or exceptions.httpx
    return module


def _status_error(status: int, headers: Mapping[str, str], body: bytes, method: str, url: str) -> openai.APIStatusError:
    """The exception the SDK raises for this response, worded as the SDK words it."""
    sdk, httpx = _sdk(), _sdk_http()
    text = body.decode(errors="replace").strip()
    parsed: object = text
    try:
        parsed = orjson.loads(body)
        message = f"Error code: {status} - {parsed}"
    except orjson.JSONDecodeError:
        message = text or f"Error code: {status}"
    data = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    response = httpx.Response(status, headers=dict(headers), content=body, request=httpx.Request(method, url))
    classes: dict[int, type[openai.APIStatusError]] = {
        400: sdk.BadRequestError,
        401: sdk.AuthenticationError,
        403: sdk.PermissionDeniedError,
        404: sdk.NotFoundError,
        409: sdk.ConflictError,
        422: sdk.UnprocessableEntityError,
        429: sdk.RateLimitError,
    }
    cls = classes.get(status) or (sdk.InternalServerError if status >= 500 else sdk.APIStatusError)
    error: openai.APIStatusError = cls(message, response=response, body=data)
    return error


def _first_choice(raw: object) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _parse_json(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        shown = body[:80].decode(errors="replace")
        raise MalformedReplyError(f"the endpoint answered 200 with a body that is not JSON: {shown!r}") from exc


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors, 5xx and malformed 200s are transient; every other error is final."""
    if isinstance(exc, MalformedReplyError):
        return True
    if not _is_sdk_error(exc):
        return False
    sdk = _sdk()
    if isinstance(exc, sdk.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, sdk.APIStatusError):
        return exc.status_code in TRANSIENT_STATUS
    return False


def _is_sdk_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "openai"  # no import needed to tell that it is not


def _is_status_error(exc: BaseException) -> bool:
    return _is_sdk_error(exc) and isinstance(exc, _sdk().APIStatusError)


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    return exc.response.headers if _is_status_error(exc) else None  # type: ignore[attr-defined]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MalformedReplyError):
        return f"malformed reply: {exc}"
    if _is_sdk_error(exc):
        sdk = _sdk()
        if isinstance(exc, sdk.APIStatusError):
            return f"HTTP {exc.status_code}: {exc.message}"
        if isinstance(exc, sdk.APITimeoutError):
            return "request timed out"
        if isinstance(exc, sdk.APIConnectionError):
            return f"connection error: {exc.__cause__ or exc}"
    return f"{type(exc).__name__}: {exc}"


def _looks_like_format_rejection(exc: openai.APIStatusError) -> bool:
    text = str(exc.message).lower() + str(getattr(exc, "body", "") or "").lower()
    return exc.status_code in (400, 422) and any(
        w in text for w in ("response_format", "json_schema", "schema", "json")
    )


def _looks_like_context_overflow(exc: openai.APIStatusError) -> bool:
    text = (str(exc.message) + str(getattr(exc, "body", "") or "")).lower()
    return (
        exc.status_code in (400, 413, 422)
        and "context" in text
        and any(w in text for w in ("length", "window", "exceed", "too long", "maximum", "tokens"))
    )


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


_KEY_HINT = ("set ModelConfig.api_key (or OPENAI_API_KEY)", "pass --api-key (or set OPENAI_API_KEY)")
_URL_HINT = ("check ModelConfig.base_url (or OPENAI_BASE_URL)", "check --base-url (or OPENAI_BASE_URL)")
_MODEL_HINT = ("set ModelConfig.model (or DEBATE_MODEL)", "pass --model (or set DEBATE_MODEL)")


class OpenAIChatClient:
    """ChatClient over any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp)."""

    def __init__(self, *, config: ModelConfig, model: str | None = None) -> None:
        if config.base_url is None:
            raise ValueError("OpenAIChatClient needs a base_url; the embedded model provides one")
        if config.api_key is None and is_hosted(config.base_url):
            # Refused before the first call: a hosted API would answer 401 after the run has started.
            raise UsageError(f"{config.base_url} is a hosted endpoint and no API key is set").with_hint(*_KEY_HINT)
        self._config = config
        self._secret = config.api_key.get_secret_value().encode() if config.api_key else b""
        self._model = model or config.model
        self._served: list[str] = []
        """The endpoint's model list, when it gave one (to name the closest match when a model is refused)."""
        self._mode: StructuredOutputMode = config.structured_output
        self._limit = asyncio.Semaphore(config.max_concurrency)
        self._base = config.base_url.rstrip("/")
        # The headers the SDK sends, computed once; no Authorization header at all without a key (a local server
        # needs none, and a made-up one only confuses a proxy's logs).
        self._request_headers = {
            **({"Authorization": f"Bearer {config.api_key.get_secret_value()}"} if config.api_key else {}),
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"markov-debate/{package_version()}",
        }
        for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(variable):
                self._request_headers[header] = os.environ[variable]
        # Environment proxies as httpx reads them, resolved once instead of on every request.
        url = urlparse(self._base)
        proxy = urllib.request.getproxies().get(url.scheme)
        self._proxy = proxy if proxy and not urllib.request.proxy_bypass(url.hostname or "") else None
        self._session: aiohttp.ClientSession | None = None
        # Built once; each call runs a copy, since a tenacity policy keeps per-call state on itself.
        self._policy = retrying(
            attempts=config.max_attempts, initial_s=config.backoff_initial_s, max_s=config.backoff_max_s,
            is_transient=is_retryable, headers_of=_headers, describe=_describe,
        )  # fmt: skip

    @property
    def model_name(self) -> str:
        if self._model is None:
            raise RuntimeError("model not resolved yet; call resolve_model() first")
        return self._model

    @property
    def structured_mode(self) -> StructuredOutputMode:
        """The structured-output mode in force (auto resolves on the first schema request)."""
        return self._mode

    def _pool(self) -> aiohttp.ClientSession:
        # Made on first use: an aiohttp session belongs to the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._config.max_concurrency, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=self._config.timeout_s),
                headers=self._request_headers,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def _http(self, method: str, path: str, payload: bytes | None = None, purpose: str | None = None) -> bytes:
        """One HTTP attempt: the body of a 2xx, else the SDK's exception for what went wrong. `purpose` (the
        request's declared purpose, e.g. "debate:skeptic") is sent as X-Debate-Purpose, for proxies' logs and
        scripted test endpoints; the model never sees it."""
        url = self._base + path
        headers = {"X-Debate-Purpose": purpose} if purpose else None
        try:
            async with self._pool().request(method, url, data=payload, proxy=self._proxy, headers=headers) as response:
                body = await response.read()
                status = response.status
                if status >= 400:
                    # Some servers echo the credentials they refused: the key must not reach an error message,
                    # and so a log, a stored failure or an API reader.
                    if self._secret:
                        body = body.replace(self._secret, b"[redacted]")
                    raise _status_error(status, response.headers, body, method, url)
                return body
        except TimeoutError as exc:  # aiohttp's own timeout errors are TimeoutErrors too
            raise _sdk().APITimeoutError(request=_sdk_http().Request(method, url)) from exc
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-body
            raise _sdk().APIConnectionError(request=_sdk_http().Request(method, url)) from exc

    def _status_error_or_raise(self, exc: Exception, unavailable: str) -> openai.APIStatusError:
        """`exc` when it is an HTTP status error, for the caller to classify. A connection failure or a malformed
        reply (every attempt spent) becomes ModelUnavailableError with `unavailable` ({why}: what went wrong);
        anything else is not an endpoint failure and is raised as it is."""
        if isinstance(exc, MalformedReplyError) or (_is_sdk_error(exc) and isinstance(exc, _sdk().APIConnectionError)):
            raise ModelUnavailableError(unavailable.format(why=_describe(exc))) from exc
        if not _is_status_error(exc):
            raise exc
        status_error: openai.APIStatusError = exc  # type: ignore[assignment]
        return status_error

    async def resolve_model(self) -> str:
        """Check that the endpoint answers (so a down server stops the run before any work), then use the
        configured model, or the endpoint's only model. Each failure says what it most likely means: nothing
        listening, a URL that is not an OpenAI API root, a refused key, or a model choice to make."""
        base = self._config.base_url
        policy = self._policy.copy()
        try:
            async for attempt in policy:
                with attempt:
                    page = _parse_json(await self._http("GET", "/models", purpose="models"))
        except MalformedReplyError as malformed:
            if self._model is not None:  # a proxy without a model list; the configured model is used as given
                return self._model
            error = ModelRequestError(f"listing models at {base} failed ({malformed})", status=None)
            raise error.with_hint(*_MODEL_HINT) from malformed
        except Exception as failure:
            if _is_sdk_error(failure) and isinstance(failure, _sdk().APIConnectionError):
                down = ModelUnavailableError(
                    f"nothing answers at {base} ({_describe(failure)} after {self._config.max_attempts} attempts)"
                )
                api, cli = _URL_HINT
                raise down.with_hint(f"is the server running? {api}", f"is the server running? {cli}") from failure
            exc = self._status_error_or_raise(failure, f"{base} is unreachable ({{why}})")
            status = exc.status_code
            if status in (401, 403):
                raise self._refused_key(exc) from exc
            if status == 404 and self._model is None:
                raise self._wrong_path(exc) from exc
            if is_retryable(exc):
                attempts = self._config.max_attempts
                raise ModelUnavailableError(f"{base}: {_describe(exc)} after {attempts} attempts") from exc
            if self._model is None:
                error = ModelRequestError(f"listing models at {base} failed ({_describe(exc)})", status=status)
                raise error.with_hint(*_MODEL_HINT) from exc
            # The endpoint has no model list (some proxies); the configured model is used as given.
            return self._model
        data = page.get("data") if isinstance(page, dict) else None
        self._served = (
            [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
            if isinstance(data, list)
            else []
        )
        if self._model is not None:
            return self._model
        if len(self._served) != 1:
            more = ", ..." if len(self._served) > 8 else ""
            listed = f" ({', '.join(self._served[:8])}{more})" if self._served else ""
            many = f"no model given and {base} serves {len(self._served)} models{listed}"
            error = ModelRequestError(many, status=None)
            raise error.with_hint(*_MODEL_HINT)
        self._model = self._served[0]
        return self._model

    def _refused_key(self, exc: openai.APIStatusError) -> DebateError:
        said = "refused the API key" if self._config.api_key else "wants an API key and none was set"
        error = ModelRequestError(f"{self._config.base_url} {said} ({_describe(exc)})", status=exc.status_code)
        return error.with_hint(*_KEY_HINT)

    def _wrong_path(self, exc: openai.APIStatusError) -> DebateError:
        """A 404 on GET /models: the base URL is not an OpenAI API root (most servers put it under /v1)."""
        base = self._base
        guess = f"; most servers serve it under /v1: try {base}/v1" if not base.endswith("/v1") else ""
        error = ModelRequestError(f"{base}/models answered 404: {base} is not an OpenAI-compatible API root{guess}",
                                  status=404)  # fmt: skip
        return error.with_hint(*_URL_HINT)

    def _model_refused(self, exc: openai.APIStatusError) -> DebateError | None:
        """A 404 (or a 400 naming the model) on a chat call when the endpoint's list lacks our model: the model
        name is wrong; name what it serves and the closest match."""
        text = (str(exc.message) + str(getattr(exc, "body", "") or "")).lower()
        model = self.model_name
        if not self._served or model in self._served or f"{model}:latest" in self._served:
            return None
        if not (exc.status_code == 404 or (exc.status_code == 400 and model.lower() in text)):
            return None
        listed = ", ".join(self._served[:12])
        close = difflib.get_close_matches(model, self._served, n=1, cutoff=0.4)
        error = ModelRequestError(
            f"{self._base} does not serve model {model!r} ({_describe(exc)}); it serves: {listed}",
            status=exc.status_code,
        )
        return error.with_hint(
            (f"did you mean {close[0]!r}? " if close else "") + _MODEL_HINT[0],
            (f"did you mean --model {close[0]}? " if close else "") + _MODEL_HINT[1],
        )

    def _response_format(self, request: ChatRequest, mode: StructuredOutputMode) -> dict[str, Any] | None:
        schema = request.response_schema
        if schema is None or mode == "none":
            return None
        if mode in ("auto", "json_schema"):
            return {"type": "json_schema", "json_schema": {"name": request.schema_name, "schema": schema}}
        # llama.cpp's server constrains decoding with this non-standard form and rejects json_schema.
        return {"type": "json_object", "schema": schema}

    def _payload(self, request: ChatRequest, mode: StructuredOutputMode) -> bytes:
        body: dict[str, Any] = {
            "model": request.model or self.model_name,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": self._config.temperature,
            "max_tokens": request.max_tokens or self._config.max_tokens,
        }
        if self._config.seed is not None:
            body["seed"] = self._config.seed
        response_format = self._response_format(request, mode)
        if response_format is not None:
            body["response_format"] = response_format
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs is not None:
                body["top_logprobs"] = request.top_logprobs
        return orjson.dumps(body)

    async def _send(
        self, payload: bytes, attempts: list[int], purpose: str
    ) -> tuple[dict[str, Any], dict[str, Any], float]:
        attempts[0] += 1
        # The model semaphore covers one HTTP attempt only: no slot is held while backing off between attempts.
        async with self._limit:
            started = time.perf_counter()
            body = await self._http("POST", "/chat/completions", payload, purpose)
            latency = time.perf_counter() - started
        raw, choice = _first_choice(_parse_json(body))
        return raw, choice, latency

    async def complete(self, request: ChatRequest) -> ChatResponse:
        while True:
            mode = self._mode
            attempts = [0]
            try:
                sent: tuple[dict[str, Any], dict[str, Any], float] = await self._policy.copy()(
                    self._send, self._payload(request, mode), attempts, request.purpose
                )
                raw, choice, latency = sent
                break
            except Exception as failure:
                exc = self._status_error_or_raise(
                    failure, f"{self._config.base_url}: {{why}} after {self._config.max_attempts} attempts"
                )
                fallback = _STRUCTURED_FALLBACK.get("json_schema" if mode == "auto" else mode)
                if (
                    self._config.structured_output == "auto"
                    and request.response_schema is not None
                    and fallback is not None
                    and _looks_like_format_rejection(exc)
                ):
                    log.info("endpoint rejected structured mode %s (%s); trying %s", mode, _describe(exc), fallback)
                    self._mode = fallback
                    continue
                if is_retryable(exc):
                    raise ModelUnavailableError(
                        f"{self._config.base_url}: {_describe(exc)} after {self._config.max_attempts} attempts"
                    ) from exc
                refused = self._model_refused(exc)
                if refused is not None:
                    raise refused from exc
                if exc.status_code in (401, 403):
                    raise self._refused_key(exc) from exc
                error = ContextTooLongError if _looks_like_context_overflow(exc) else ModelRequestError
                raise error(f"{self._config.base_url}: {_describe(exc)}", status=exc.status_code) from exc
        if mode == "auto" and request.response_schema is not None:
            self._mode = "json_schema"
        return self._convert(raw, choice, attempts[0], latency)

    def _convert(self, raw: dict[str, Any], choice: dict[str, Any], attempts: int, latency: float) -> ChatResponse:
        usage: dict[str, Any] = raw["usage"] if isinstance(raw.get("usage"), dict) else {}
        logprobs: list[TokenLogprob] | None = None
        content = choice["logprobs"].get("content") if isinstance(choice.get("logprobs"), dict) else None
        if content:
            logprobs = [
                TokenLogprob(
                    token=t["token"],
                    logprob=t["logprob"],
                    top=[TopLogprob(token=a["token"], logprob=a["logprob"]) for a in (t.get("top_logprobs") or [])],
                )
                for t in content
            ]
        return ChatResponse(
            text=choice["message"]["content"],
            usage=Usage(
                llm_calls=1,
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
            ),
            logprobs=logprobs,
            finish_reason=choice.get("finish_reason"),
            model=raw.get("model") or self.model_name,
            latency_s=latency,
            http_attempts=attempts,
        )

    async def accept(self, response: ChatResponse) -> None:
        return None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
