"""Model I/O in our own types: a chat request, its response (text, usage, logprobs), and the one client interface
every stage and plugin talks to (implemented in debate.llm)."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from debate.types._core import Usage

__all__ = ["ChatClient", "ChatMessage", "ChatRequest", "ChatResponse", "TokenLogprob", "TopLogprob"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatMessage(_Model):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    """Who says it."""
    content: str
    """The text."""


class ChatRequest(_Model):
    """A chat completion request, independent of any SDK."""

    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation."""
    response_schema: dict[str, Any] | None = None
    """JSON schema the reply should follow; applied per the client's structured-output mode."""
    schema_name: str = "reply"
    """Name for the schema where the endpoint wants one."""
    logprobs: bool = False
    """Ask for token logprobs."""
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    """Alternatives per token, with their token strings."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Overrides the client's default."""
    model: str | None = None
    """Another model on the same endpoint for this call (e.g. the smaller model of a two-step judge); None: the
    client's model."""
    purpose: str = "other"
    """What the call is for (`debate:<role>`, `extract`, `subjective_filter`, `queries`, `grounding`, `judge`, ...):
    recorded, and what test clients route by. Sent as the X-Debate-Purpose header, never in the body the model reads."""
    site: str | None = None
    """Where in a run the call is made (claim, state, round, attempt): two identical requests from different sites
    are different samples at temperature > 0, so the call cache keys on it then. Sent as the X-Debate-Site header,
    never in the body the model reads."""


class TopLogprob(_Model):
    """An alternative token and its logprob."""

    token: str
    """Token text."""
    logprob: float
    """Natural-log probability."""


class TokenLogprob(_Model):
    """A generated token with its logprob and alternatives."""

    token: str
    """Token text."""
    logprob: float
    """Natural-log probability."""
    top: list[TopLogprob] = Field(default_factory=list)
    """Most likely alternatives at this position, token strings kept."""


class ChatResponse(_Model):
    """What a model call returns."""

    text: str
    """Reply text (empty when the endpoint returned none)."""
    usage: Usage
    """One call's usage."""
    logprobs: list[TokenLogprob] | None = None
    """Token logprobs, when asked for and returned."""
    finish_reason: str | None = None
    """Endpoint's finish reason."""
    model: str
    """Model that answered."""
    latency_s: float = Field(ge=0)
    """The answering HTTP attempt's own time (no queueing, no backoff)."""
    http_attempts: int = Field(default=1, ge=1)
    """HTTP attempts it took."""


@runtime_checkable
class ChatClient(Protocol):
    """All model I/O goes through this."""

    @property
    def model_name(self) -> str: ...

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def accept(self, response: ChatResponse) -> None:
        """The caller found `response` usable (a cache may keep it; an unusable reply is never replayed)."""
        ...

    async def aclose(self) -> None: ...
