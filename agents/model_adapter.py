"""autogen-core's ChatCompletionClient over our ChatClient, so agents share our retry, usage and logprob handling."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    ChatCompletionTokenLogprob,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    TopLogprob,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from debate.llm import ChatClient, ChatMessage, ChatRequest, ChatResponse

__all__ = ["DebateModelClient"]

_FINISH: dict[str, Literal["stop", "length", "function_calls", "content_filter", "unknown"]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "function_calls",
    "function_call": "function_calls",
    "content_filter": "content_filter",
}


def _to_chat_message(message: LLMMessage) -> ChatMessage:
    if isinstance(message, SystemMessage):
        return ChatMessage(role="system", content=message.content)
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        return ChatMessage(role="user", content=message.content)
    if isinstance(message, AssistantMessage) and isinstance(message.content, str):
        return ChatMessage(role="assistant", content=message.content)
    raise TypeError(f"debate agents exchange text only; got {type(message).__name__}")


class DebateModelClient(ChatCompletionClient):
    """One adapter per agent: it keeps that agent's call log, so nothing is shared between agents or claims."""

    def __init__(
        self,
        client: ChatClient,
        *,
        response_schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
        purpose: str,
        context_window: int = 4096,
    ) -> None:
        self._client = client
        self._schema = response_schema
        self._schema_name = schema_name
        self._purpose = purpose
        self._context_window = context_window
        self.calls: list[ChatResponse] = []
        """Every response this agent received, in order (usage, latency, finish reason, logprobs)."""

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        if tools:
            raise ValueError("debate agents do not call tools")
        request = ChatRequest(
            messages=[_to_chat_message(m) for m in messages],
            response_schema=self._schema,
            schema_name=self._schema_name,
            purpose=self._purpose,
            site=str(extra_create_args["site"]) if "site" in extra_create_args else None,
        )
        response = await self._client.complete(request)
        self.calls.append(response)
        return CreateResult(
            finish_reason=_FINISH.get(response.finish_reason or "", "unknown"),
            content=response.text,
            usage=RequestUsage(
                prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens
            ),
            cached=False,
            logprobs=[
                ChatCompletionTokenLogprob(
                    token=t.token, logprob=t.logprob, top_logprobs=[TopLogprob(logprob=a.logprob) for a in t.top]
                )
                for t in response.logprobs
            ]
            if response.logprobs
            else None,
        )

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        # Debate turns are short JSON replies; one final result is all a stream would carry.
        yield await self.create(messages, tools=tools, json_output=json_output, cancellation_token=cancellation_token)

    async def accept_last(self) -> None:
        """The last reply was usable: let the client (a call cache) keep it."""
        if self.calls:
            await self._client.accept(self.calls[-1])

    async def close(self) -> None:
        """The shared ChatClient belongs to the Verifier, which closes it."""

    def actual_usage(self) -> RequestUsage:
        return self.total_usage()

    def total_usage(self) -> RequestUsage:
        return RequestUsage(
            prompt_tokens=sum(c.usage.prompt_tokens for c in self.calls),
            completion_tokens=sum(c.usage.completion_tokens for c in self.calls),
        )

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        """An estimate (4 characters a token): the endpoint's tokenizer is not available here."""
        return sum(len(_to_chat_message(m).content) for m in messages) // 4 + 1

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return max(0, self._context_window - self.count_tokens(messages, tools=tools))

    @property
    def capabilities(self) -> ModelCapabilities:
        return {"vision": False, "function_calling": False, "json_output": True}

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(
            vision=False,
            function_calling=False,
            json_output=True,
            family=ModelFamily.UNKNOWN,
            structured_output=self._schema is not None,
        )
