"""The one interface for model I/O: requests, responses (text, usage, logprobs) and errors, in our own types."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from debate.types import Usage

__all__ = [
    "ChatClient",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "TokenLogprob",
    "TopLogprob",
]


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
    """Wall time including retries."""
    http_attempts: int = Field(default=1, ge=1)
    """HTTP attempts it took."""


class ModelError(Exception):
    """A model call failed. Never turned into a verdict."""


class ModelUnavailableError(ModelError):
    """Retryable failures (429, 5xx, timeouts, connection errors) persisted past the attempt limit."""


class ModelRequestError(ModelError):
    """The endpoint refused the request (4xx); retrying cannot help."""

    def __init__(self, message: str, *, status: int | None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def fatal(self) -> bool:
        """Authentication, permission or unknown model/URL: every further call would fail the same way."""
        return self.status in (401, 403, 404)


@runtime_checkable
class ChatClient(Protocol):
    """All model I/O goes through this."""

    @property
    def model_name(self) -> str: ...

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
