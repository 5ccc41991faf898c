"""The only module that talks to the OpenAI SDK. Retry for every model call lives here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import openai  # noqa: TID251 - the one module allowed to

from debate.config import ModelConfig, StructuredOutputMode
from debate.llm.base import (
    ChatRequest,
    ChatResponse,
    ContextTooLongError,
    ModelRequestError,
    ModelUnavailableError,
    TokenLogprob,
    TopLogprob,
)
from debate.retry import TRANSIENT_STATUS, retrying
from debate.types import Usage

__all__ = ["MalformedReplyError", "OpenAIChatClient", "is_retryable"]

log = logging.getLogger(__name__)

_STRUCTURED_FALLBACK: dict[StructuredOutputMode, StructuredOutputMode] = {
    "json_schema": "json_object",
    "json_object": "none",
}


class MalformedReplyError(Exception):
    """A 200 whose body is not a usable chat completion (HTML, truncated JSON, an error object, no choices, no
    content): a fault of the endpoint or a proxy in front of it, so it is retried like a 5xx."""


def _check_reply(raw: Any) -> None:
    if isinstance(raw, (str, bytes)):
        shown = raw[:80] if isinstance(raw, str) else raw[:80].decode(errors="replace")
        raise MalformedReplyError(f"the endpoint answered 200 with a body that is not JSON: {shown!r}")
    extra = getattr(raw, "model_extra", None) or {}
    if "error" in extra:
        error = extra["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise MalformedReplyError(f"the endpoint answered 200 with an error: {message}")
    if not getattr(raw, "choices", None):
        raise MalformedReplyError("the endpoint answered 200 with no choices")
    message = raw.choices[0].message
    if message is None or message.content is None:
        refusal = getattr(message, "refusal", None) if message is not None else None
        raise MalformedReplyError(f"the reply has no content{f' (refusal: {refusal})' if refusal else ''}")


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors, 5xx and malformed 200s are transient; every other error is final."""
    if isinstance(exc, (openai.APIConnectionError, MalformedReplyError)):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in TRANSIENT_STATUS
    return False


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    return exc.response.headers if isinstance(exc, openai.APIStatusError) else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {exc.__cause__ or exc}"
    if isinstance(exc, MalformedReplyError):
        return f"malformed reply: {exc}"
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


class OpenAIChatClient:
    """ChatClient over any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp)."""

    def __init__(self, *, config: ModelConfig, model: str | None = None) -> None:
        if config.base_url is None:
            raise ValueError("OpenAIChatClient needs a base_url; the embedded model provides one")
        self._config = config
        self._model = model or config.model
        self._mode: StructuredOutputMode = config.structured_output
        self._limit = asyncio.Semaphore(config.max_concurrency)
        api_key = config.api_key.get_secret_value() if config.api_key else "no-key"
        # The SDK's own retries are off: retry lives in one place, here, with our policy.
        self._sdk = openai.AsyncOpenAI(
            base_url=config.base_url, api_key=api_key, timeout=config.timeout_s, max_retries=0
        )

    @property
    def model_name(self) -> str:
        if self._model is None:
            raise RuntimeError("model not resolved yet; call resolve_model() first")
        return self._model

    @property
    def structured_mode(self) -> StructuredOutputMode:
        """The structured-output mode in force (auto resolves on the first schema request)."""
        return self._mode

    async def resolve_model(self) -> str:
        """Check that the endpoint answers (so a down server stops the run before any work), then use the
        configured model, or the endpoint's only model."""
        policy = retrying(
            attempts=self._config.max_attempts, initial_s=self._config.backoff_initial_s,
            max_s=self._config.backoff_max_s, is_transient=is_retryable, headers_of=_headers, describe=_describe,
        )  # fmt: skip
        try:
            async for attempt in policy:
                with attempt:
                    page = await self._sdk.models.list()
        except (openai.APIConnectionError, MalformedReplyError) as exc:
            raise ModelUnavailableError(
                f"{self._config.base_url} is unreachable ({_describe(exc)} after {self._config.max_attempts} "
                "attempts); is the server running?"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403) or (self._model is None and not is_retryable(exc)):
                raise ModelRequestError(
                    f"listing models at {self._config.base_url} failed ({_describe(exc)})"
                    + ("; pass --model" if self._model is None and exc.status_code not in (401, 403) else ""),
                    status=exc.status_code,
                ) from exc
            if is_retryable(exc):
                raise ModelUnavailableError(
                    f"{self._config.base_url}: {_describe(exc)} after {self._config.max_attempts} attempts"
                ) from exc
            # The endpoint has no model list (some proxies); the configured model is used as given.
            assert self._model is not None
            return self._model
        if self._model is not None:
            return self._model
        ids = [m.id for m in page.data]
        if len(ids) != 1:
            raise ModelRequestError(
                f"no model given and {self._config.base_url} serves {len(ids)} models ({', '.join(ids[:5])}); "
                "pass --model or DEBATE_MODEL",
                status=None,
            )
        self._model = ids[0]
        return self._model

    def _response_format(self, request: ChatRequest, mode: StructuredOutputMode) -> dict[str, Any] | None:
        schema = request.response_schema
        if schema is None or mode == "none":
            return None
        if mode in ("auto", "json_schema"):
            return {"type": "json_schema", "json_schema": {"name": request.schema_name, "schema": schema}}
        # llama.cpp's server constrains decoding with this non-standard form and rejects json_schema.
        return {"type": "json_object", "schema": schema}

    async def _send(self, request: ChatRequest, mode: StructuredOutputMode) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": [m.model_dump() for m in request.messages],
            "temperature": self._config.temperature,
            "max_tokens": request.max_tokens or self._config.max_tokens,
        }
        if self._config.seed is not None:
            kwargs["seed"] = self._config.seed
        response_format = self._response_format(request, mode)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if request.logprobs:
            kwargs["logprobs"] = True
            if request.top_logprobs is not None:
                kwargs["top_logprobs"] = request.top_logprobs
        # The model semaphore covers one HTTP attempt only: no slot is held while backing off between attempts.
        async with self._limit:
            started = time.perf_counter()
            try:
                raw = await self._sdk.chat.completions.create(**kwargs)
            except ValueError as exc:  # the SDK's JSON decoding of a truncated or broken 200 body
                raise MalformedReplyError(f"the endpoint answered 200 with broken JSON ({exc})") from exc
            latency = time.perf_counter() - started
        _check_reply(raw)
        return raw, latency

    async def _send_with_retry(self, request: ChatRequest, mode: StructuredOutputMode) -> tuple[Any, float, int]:
        policy = retrying(
            attempts=self._config.max_attempts,
            initial_s=self._config.backoff_initial_s,
            max_s=self._config.backoff_max_s,
            is_transient=is_retryable,
            headers_of=_headers,
            describe=_describe,
        )
        attempts = 0
        async for attempt in policy:
            with attempt:
                attempts = attempt.retry_state.attempt_number
                raw, latency = await self._send(request, mode)
                return raw, latency, attempts
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def complete(self, request: ChatRequest) -> ChatResponse:
        while True:
            mode = self._mode
            try:
                raw, latency, attempts = await self._send_with_retry(request, mode)
                break
            except openai.APIStatusError as exc:
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
                error = ContextTooLongError if _looks_like_context_overflow(exc) else ModelRequestError
                raise error(f"{self._config.base_url}: {_describe(exc)}", status=exc.status_code) from exc
            except (openai.APIConnectionError, MalformedReplyError) as exc:
                raise ModelUnavailableError(
                    f"{self._config.base_url}: {_describe(exc)} after {self._config.max_attempts} attempts"
                ) from exc
        if mode == "auto" and request.response_schema is not None:
            self._mode = "json_schema"
        return self._convert(raw, attempts, latency)

    def _convert(self, raw: Any, attempts: int, latency: float) -> ChatResponse:
        choice = raw.choices[0] if raw.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        usage = Usage(
            llm_calls=1,
            prompt_tokens=(raw.usage.prompt_tokens or 0) if raw.usage else 0,
            completion_tokens=(raw.usage.completion_tokens or 0) if raw.usage else 0,
        )
        logprobs: list[TokenLogprob] | None = None
        content = choice.logprobs.content if choice and choice.logprobs else None
        if content:
            logprobs = [
                TokenLogprob(
                    token=t.token,
                    logprob=t.logprob,
                    top=[TopLogprob(token=a.token, logprob=a.logprob) for a in (t.top_logprobs or [])],
                )
                for t in content
            ]
        return ChatResponse(
            text=text,
            usage=usage,
            logprobs=logprobs,
            finish_reason=choice.finish_reason if choice else None,
            model=raw.model or self.model_name,
            latency_s=latency,
            http_attempts=attempts,
        )

    async def accept(self, response: ChatResponse) -> None:
        return None

    async def aclose(self) -> None:
        await self._sdk.close()
