"""The only module that talks to the OpenAI endpoint API. Retry for every model call lives here.

Requests go over one aiohttp connection pool sized from the model semaphore, with bodies encoded and decoded by
orjson into our own types: the SDK's own request path costs ~1.5-7 ms of CPU per call (its request transform and
httpx's pool bookkeeping), which caps a 2-core machine far below a fast endpoint's throughput. A failed attempt
raises our own transport errors (debate.llm._transport: status, body, headers, Retry-After) straight from the
response; debate.llm._diagnosis says what a final failure means. The SDK's request semantics are kept (its auth
headers, OPENAI_ORG_ID / OPENAI_PROJECT_ID, the environment's proxies), and its request types check our payload
(for the type checker only: nothing of the SDK is imported at run time). This is the only request path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.request
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

import aiohttp
import orjson

from debate.config import ModelConfig, StructuredOutputMode
from debate.errors import EndpointConnectionError, EndpointHTTPError, MalformedReplyError, UsageError
from debate.llm._base import (
    ChatRequest,
    ChatResponse,
    ModelRequestError,
    ModelUnavailableError,
    TokenLogprob,
    TopLogprob,
)
from debate.llm._bounds import bounded_strings, worst_case_tokens
from debate.llm._diagnosis import (
    KEY_HINT,
    MODEL_HINT,
    chat_failure,
    format_rejected,
    is_hosted,
    listing_failure,
    nothing_answers,
)
from debate.llm._headers import request_tags
from debate.llm._ratelimit import RateLimiter
from debate.llm._transport import (
    connection_problem,
    describe,
    first_choice,
    headers_of,
    http_error,
    is_retryable,
    parse_body,
)
from debate.provenance import package_version
from debate.retry import retrying
from debate.types import Usage

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam  # noqa: TID251 - the one module allowed to

__all__ = ["MalformedReplyError", "OpenAIChatClient", "env_proxy", "is_hosted", "is_retryable"]

log = logging.getLogger(__name__)

_STRUCTURED_FALLBACK: dict[StructuredOutputMode, StructuredOutputMode] = {
    "json_schema": "json_object",
    "json_object": "none",
}


def _retryable_unless_refused(exc: BaseException) -> bool:
    """`is_retryable`, except a connection nothing accepted: for a caller that must not wait on a dead endpoint."""
    return is_retryable(exc) and not (isinstance(exc, EndpointConnectionError) and exc.refused)


def _attempts(made: int) -> str:
    return "1 attempt" if made <= 1 else f"{made} attempts"


def env_proxy(url: str) -> str | None:
    """The proxy HTTP(S)_PROXY / NO_PROXY give for `url`, as httpx reads them: resolved once by a long-lived
    client (aiohttp's trust_env reads them, and ~/.netrc, on a worker thread for every request)."""
    parts = urlparse(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    return proxy if proxy and not urllib.request.proxy_bypass(parts.hostname or "") else None


class OpenAIChatClient:
    """ChatClient over any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp)."""

    def __init__(self, *, config: ModelConfig, model: str | None = None, still_waiting_s: float | None = None) -> None:
        """`still_waiting_s`: while one attempt has been answered for this long and longer, say so on the log every
        as many seconds (a local model on a busy CPU is slow, not down: the user sees it working)."""
        self._still_waiting_s = still_waiting_s
        if config.base_url is None:
            raise UsageError("OpenAIChatClient needs a base_url; the embedded model provides one")
        if config.api_key is None and is_hosted(config.base_url):
            # Refused before the first call: a hosted API would answer 401 after the run has started.
            raise UsageError(f"{config.base_url} is a hosted endpoint and no API key is set").with_hint(*KEY_HINT)
        self._config = config
        self._secret = config.api_key.get_secret_value().encode() if config.api_key else b""
        self._model = model or config.model
        self._served: list[str] = []
        """The endpoint's model list, when it gave one (to name the closest match when a model is refused)."""
        self._mode: StructuredOutputMode = config.structured_output
        self._limit = asyncio.Semaphore(config.max_concurrency)
        self._base = config.base_url.rstrip("/")
        self._rate = RateLimiter(
            self._base, requests_per_minute=config.requests_per_minute, tokens_per_minute=config.tokens_per_minute
        )
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
        self._proxy = env_proxy(self._base)
        self._session: aiohttp.ClientSession | None = None
        # Built once; each call runs a copy, since a tenacity policy keeps per-call state on itself.
        self._policy = retrying(
            attempts=config.max_attempts,
            initial_s=config.backoff_initial_s,
            max_s=config.backoff_max_s,
            is_transient=is_retryable if config.retry_refused else _retryable_unless_refused,
            headers_of=headers_of,
            describe=describe,
        )

    @property
    def model_name(self) -> str:
        if self._model is None:
            raise UsageError("model not resolved yet; call resolve_model() first")
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

    async def _http(
        self, method: str, path: str, payload: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[bytes, Mapping[str, str]]:
        """One HTTP attempt: the body and headers of a 2xx, else our transport error for what went wrong."""
        url = self._base + path
        try:
            async with self._pool().request(method, url, data=payload, proxy=self._proxy, headers=headers) as response:
                body = await response.read()
                if response.status >= 400:
                    # Some servers echo the credentials they refused: the key must not reach an error message,
                    # and so a log, a stored failure or an API reader.
                    if self._secret:
                        body = body.replace(self._secret, b"[redacted]")
                    raise http_error(response.status, body, response.headers, method=method, url=url)
                return body, {key.lower(): value for key, value in response.headers.items()}
        except TimeoutError as exc:  # aiohttp's own timeout errors are TimeoutErrors too
            raise EndpointConnectionError(method=method, url=url, timeout=True) from exc
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-body
            reason = connection_problem(exc, urlparse(url).netloc)
            never = isinstance(exc, aiohttp.ClientConnectorError)  # no connection made (refused, DNS, no route)
            raise EndpointConnectionError(method=method, url=url, timeout=False, reason=reason, refused=never) from exc

    async def resolve_model(self) -> str:
        """Check that the endpoint answers (so a down server stops the run before any work), then use the
        configured model, or the endpoint's only model. Each failure says what it most likely means: nothing
        listening, a URL that is not an OpenAI API root, a refused key, or a model choice to make."""
        page = await self._list_models()
        if page is None:  # no model list (some proxies): the configured model is used as given
            return self.model_name
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
            many = f"no model given and {self._config.base_url} serves {len(self._served)} models{listed}"
            raise ModelRequestError(many, status=None).with_hint(*MODEL_HINT)
        self._model = self._served[0]
        return self._model

    async def _list_models(self) -> object | None:
        """GET /models (retried), or None when the endpoint has no list and a model is configured."""
        base, attempts = str(self._config.base_url), self._config.max_attempts
        try:
            async for attempt in self._policy.copy():
                with attempt:
                    body, _ = await self._http("GET", "/models", headers={"X-Debate-Purpose": "models"})
                    return parse_body(body)
        except MalformedReplyError as malformed:
            if self._model is not None:
                return None
            error = ModelRequestError(f"listing models at {base} failed ({malformed})", status=None)
            raise error.with_hint(*MODEL_HINT) from malformed
        except EndpointConnectionError as down:
            # from None: the one line says what happened; aiohttp's chain beneath it is only noise to a reader
            raise nothing_answers(base, down, attempts) from None
        except EndpointHTTPError as exc:
            diagnosed = listing_failure(
                exc, base, model=self._model, has_key=self._config.api_key is not None, attempts=attempts
            )
            if diagnosed is not None:
                raise diagnosed from exc
            return None
        raise AssertionError("the retry policy ends in a return or an exception")  # pragma: no cover

    def _response_format(self, request: ChatRequest, mode: StructuredOutputMode) -> dict[str, Any] | None:
        schema = request.response_schema
        if schema is None or mode == "none":
            return None
        if mode in ("auto", "json_schema"):
            return {"type": "json_schema", "json_schema": {"name": request.schema_name, "schema": schema}}
        # llama.cpp's server constrains decoding with this non-standard form and rejects json_schema.
        return {"type": "json_object", "schema": schema}

    def _payload(self, request: ChatRequest, mode: StructuredOutputMode) -> bytes:
        max_tokens = request.max_tokens or self._config.max_tokens
        bound = self._config.max_string_chars
        if bound is not None and request.response_schema is not None and mode != "none":
            schema = bounded_strings(request.response_schema, bound)
            request = request.model_copy(update={"response_schema": schema})
            max_tokens = max(max_tokens, worst_case_tokens(schema) or 0)
        body: dict[str, Any] = {
            "model": request.model or self.model_name,
            "messages": _messages(request),
            "temperature": self._config.temperature,
            "max_tokens": max_tokens,
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
        self, payload: bytes, attempts: list[int], headers: Mapping[str, str]
    ) -> tuple[dict[str, Any], dict[str, Any], float]:
        attempts[0] += 1
        # Every attempt takes its place under the rate limits first; the model semaphore then covers the one HTTP
        # attempt only: no slot is held while waiting for the rate or backing off between attempts.
        reserved = len(payload) // 4 + self._config.max_tokens
        await self._rate.acquire(reserved)
        async with self._limit:
            started = time.perf_counter()
            try:
                body, answered = await self._watched(self._http("POST", "/chat/completions", payload, headers), headers)
            except EndpointHTTPError as exc:
                self._rate.observe(exc.headers)
                if exc.status == 429 and exc.retry_after is not None:
                    self._rate.pause(exc.retry_after)  # every process of the run waits, not only this call
                raise
            latency = time.perf_counter() - started
        self._rate.observe(answered)
        raw, choice = first_choice(parse_body(body))
        usage = raw.get("usage")
        if isinstance(usage, dict):
            self._rate.settle(reserved, int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0))
        return raw, choice, latency

    async def _watched(
        self, attempt: Coroutine[Any, Any, tuple[bytes, Mapping[str, str]]], headers: Mapping[str, str]
    ) -> tuple[bytes, Mapping[str, str]]:
        """The attempt, with a line on the log every `still_waiting_s` while it runs (cancelled with its caller)."""
        if self._still_waiting_s is None:
            return await attempt
        running = asyncio.ensure_future(attempt)
        started = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({running}, timeout=self._still_waiting_s)
                if done:
                    return running.result()
                log.warning(
                    "%s is still generating one reply (%s, %.0f s so far; up to %.0f s): slow, not down",
                    self._model or "the model",
                    headers.get("X-Debate-Purpose", "a call"),
                    time.monotonic() - started,
                    self._config.timeout_s,
                )
        finally:
            if not running.done():
                running.cancel()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        while True:
            mode = self._mode
            attempts = [0]
            try:
                sent: tuple[dict[str, Any], dict[str, Any], float] = await self._policy.copy()(
                    self._send, self._payload(request, mode), attempts, request_tags(request)
                )
                raw, choice, latency = sent
                break
            except (MalformedReplyError, EndpointConnectionError) as exc:
                raise ModelUnavailableError(
                    f"{self._config.base_url}: {describe(exc)} after {_attempts(attempts[0])}"
                ) from exc
            except EndpointHTTPError as exc:
                fallback = _STRUCTURED_FALLBACK.get("json_schema" if mode == "auto" else mode)
                if self._may_fall_back(request, fallback, exc):
                    log.info("endpoint rejected structured mode %s (%s); trying %s", mode, describe(exc), fallback)
                    self._mode = cast("StructuredOutputMode", fallback)
                    continue
                raise chat_failure(
                    exc,
                    str(self._config.base_url),
                    model=self.model_name,
                    served=self._served,
                    has_key=self._config.api_key is not None,
                    attempts=max(1, attempts[0]),
                ) from exc
        if mode == "auto" and request.response_schema is not None:
            self._mode = "json_schema"
        return self._convert(raw, choice, attempts[0], latency)

    def _may_fall_back(
        self, request: ChatRequest, fallback: StructuredOutputMode | None, exc: EndpointHTTPError
    ) -> bool:
        """Under `auto`, a structured mode the endpoint refuses is stepped down (json_schema -> json_object ->
        none) instead of failing the call."""
        return (
            self._config.structured_output == "auto"
            and request.response_schema is not None
            and fallback is not None
            and format_rejected(exc)
        )

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


def _messages(request: ChatRequest) -> list[ChatCompletionMessageParam]:
    return [cast("ChatCompletionMessageParam", {"role": m.role, "content": m.content}) for m in request.messages]
