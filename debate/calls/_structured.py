"""The one bounded re-ask loop for structured model replies, shared by agents and by the claim extractor.

A malformed reply is not a network error: the model is told what was wrong and asked again, a bounded number of
times; after that the caller reports the item as unverifiable (or as an error), never as true or false.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from debate.calls._prompts import PromptTemplate, load_prompt
from debate.errors import ReplyUnusableError
from debate.llm import ChatClient, ChatMessage, ChatRequest, ChatResponse
from debate.types import CallInfo, SentMessage, Usage

__all__ = ["ChatConversation", "Conversation", "Structured", "ask_structured", "call_info", "converse"]

T = TypeVar("T")


@dataclass
class Structured(Generic[T]):
    """Outcome of a bounded re-ask loop."""

    value: T | None
    attempts: int
    errors: list[str] = field(default_factory=list)
    responses: list[ChatResponse] = field(default_factory=list)
    """Every response of the exchange, in order: its usage, latency and finish reasons."""

    @property
    def usage(self) -> Usage:
        """Tokens and calls of the whole exchange, re-asks included."""
        return Usage.total(r.usage for r in self.responses)

    def info(self, prompt: PromptTemplate, messages: Sequence[SentMessage] | None = None) -> CallInfo:
        """The transcript record of this exchange (with its exact messages when given)."""
        return call_info(prompt, self.responses, self.attempts, self.errors, messages)

    @property
    def failure(self) -> str | None:
        if self.value is not None:
            return None
        last = self.errors[-1] if self.errors else "no reply"
        return f"no usable reply after {self.attempts} attempts; last problem: {last}"

    def unwrap(self) -> T:
        """The value, or ReplyUnusableError with the failure."""
        if self.value is None:
            raise ReplyUnusableError(self.failure or "no usable reply")
        return self.value


class Conversation(Protocol):
    """One model conversation a structured exchange runs in."""

    async def send(self, text: str) -> ChatResponse:
        """Send a user message; return the model's response."""
        ...

    async def accept(self) -> None:
        """The last reply was usable: a call cache may keep it (an unusable one is never replayed)."""
        ...


async def ask_structured(
    conversation: Conversation,
    first_message: str,
    parse: Callable[[str], T],
    *,
    max_retries: int,
    expected: str,
    reask: PromptTemplate | None = None,
) -> Structured[T]:
    """Send `first_message`; while `parse` raises ReplyUnusableError, re-ask with the error. Any other exception
    (a network failure, a bug in `parse`) propagates: it is not the model's reply that is at fault.

    `expected` names the reply format in the re-ask, e.g. 'a JSON object {"claims": [...]}'.
    """
    template = reask or load_prompt("reask")
    message = first_message
    errors: list[str] = []
    responses: list[ChatResponse] = []
    for attempt in range(1, max_retries + 2):
        response = await conversation.send(message)
        responses.append(response)
        try:
            value = parse(response.text)
        except ReplyUnusableError as exc:
            errors.append(str(exc))
            _, message = template.render(error=str(exc), expected=expected)
            continue
        await conversation.accept()
        return Structured(value, attempt, errors, responses)
    return Structured(None, max_retries + 1, errors, responses)


class ChatConversation:
    """A Conversation over a plain ChatClient: each re-ask continues the same conversation."""

    def __init__(
        self,
        client: ChatClient,
        system: str,
        *,
        schema: dict[str, object] | None,
        schema_name: str,
        purpose: str,
        site: str | None = None,
        model: str | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._schema = schema
        self._schema_name = schema_name
        self._purpose = purpose
        self._site = site or purpose
        self._messages: list[ChatMessage] = [ChatMessage(role="system", content=system)] if system else []
        self.responses: list[ChatResponse] = []
        """Every response received, in order (also on the outcome; kept here for an exchange an error cut short)."""

    async def send(self, text: str) -> ChatResponse:
        self._messages.append(ChatMessage(role="user", content=text))
        response = await self._client.complete(
            ChatRequest(
                messages=list(self._messages),
                response_schema=self._schema,
                schema_name=self._schema_name,
                purpose=self._purpose,
                site=f"{self._site}#{len(self.responses) + 1}",
                model=self._model,
            )
        )
        self.responses.append(response)
        self._messages.append(ChatMessage(role="assistant", content=response.text))
        return response

    async def accept(self) -> None:
        if self.responses:
            await self._client.accept(self.responses[-1])

    def messages(self) -> list[SentMessage]:
        """The exchange so far, exactly as sent and received."""
        return [SentMessage(role=m.role, content=m.content) for m in self._messages]

    def info(self, prompt: PromptTemplate, messages: Sequence[SentMessage] | None = None) -> CallInfo:
        """The transcript record of an exchange an error cut short (no outcome to read it from)."""
        return call_info(prompt, self.responses, max(1, len(self.responses)), [], messages)


def converse(
    client: ChatClient,
    system: str,
    *,
    schema: dict[str, object] | None,
    schema_name: str,
    purpose: str,
    site: str | None = None,
    model: str | None = None,
) -> ChatConversation:
    """A conversation for ask_structured over a plain ChatClient (`model`: another model on the same endpoint)."""
    return ChatConversation(
        client, system, schema=schema, schema_name=schema_name, purpose=purpose, site=site, model=model
    )


def call_info(
    prompt: PromptTemplate,
    responses: Sequence[ChatResponse],
    attempts: int,
    errors: list[str],
    messages: Sequence[SentMessage] | None = None,
) -> CallInfo:
    """The transcript record of one structured exchange (with its exact messages when given)."""
    return CallInfo(
        messages=None if messages is None else list(messages),
        prompt=prompt.name,
        prompt_hash=prompt.sha256,
        attempts=attempts,
        parse_errors=errors,
        usage=Usage.total(r.usage for r in responses),
        latency_s=sum(r.latency_s for r in responses),
        finish_reason=responses[-1].finish_reason if responses else None,
        model=responses[-1].model if responses else None,
    )
