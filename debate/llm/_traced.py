"""A ChatClient that makes one LLM span per model call (debate.telemetry), around whatever client it wraps."""

from __future__ import annotations

from typing import Any

from debate.llm._base import ChatClient, ChatRequest, ChatResponse
from debate.telemetry import set_attributes, span

__all__ = ["TracedChatClient"]


def _request_attributes(request: ChatRequest, model: str, temperature: float | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.temperature": temperature,
        "llm.model_name": model,
        "llm.system": "openai",
        "llm.invocation_parameters": {
            "max_tokens": request.max_tokens,
            "temperature": temperature,
            "response_format": "schema" if request.response_schema else None,
        },
        "debate.purpose": request.purpose,
        "debate.site": request.site,
        "input.value": request.messages[-1].content,
    }
    for index, message in enumerate(request.messages):
        attributes[f"llm.input_messages.{index}.message.role"] = message.role
        attributes[f"llm.input_messages.{index}.message.content"] = message.content
    return attributes


def _response_attributes(response: ChatResponse) -> dict[str, Any]:
    usage = response.usage
    return {
        "gen_ai.response.model": response.model,
        "gen_ai.response.finish_reasons": [response.finish_reason] if response.finish_reason else None,
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "llm.token_count.prompt": usage.prompt_tokens,
        "llm.token_count.completion": usage.completion_tokens,
        "llm.token_count.total": usage.prompt_tokens + usage.completion_tokens,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": response.text,
        "output.value": response.text,
        "debate.http_attempts": response.http_attempts,
    }


class TracedChatClient:
    """Each `complete` is an LLM span named `chat <model>` (the GenAI convention), child of the span current where
    the call is made (a turn, a prefilter, an extraction)."""

    def __init__(self, inner: ChatClient, *, temperature: float | None = None, owns_inner: bool = True) -> None:
        self._inner = inner
        self._temperature = temperature
        self._owns_inner = owns_inner

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def inner(self) -> ChatClient:
        """The wrapped client."""
        return self._inner

    async def complete(self, request: ChatRequest) -> ChatResponse:
        model = request.model or self._inner.model_name
        with span(f"chat {model}", "LLM", _request_attributes(request, model, self._temperature)) as current:
            response = await self._inner.complete(request)
            set_attributes(current, _response_attributes(response))
            return response

    async def accept(self, response: ChatResponse) -> None:
        await self._inner.accept(response)

    async def aclose(self) -> None:
        if self._owns_inner:
            await self._inner.aclose()
