"""Model I/O: one client interface, one SDK-facing implementation, the embedded default."""

from debate.llm._base import (
    ChatClient,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ContextTooLongError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    TokenLogprob,
    TopLogprob,
    current_item,
    item_scope,
)
from debate.llm._cache import CACHE_FILE

__all__ = [
    "CACHE_FILE",
    "ChatClient",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "ContextTooLongError",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "TokenLogprob",
    "TopLogprob",
    "current_item",
    "item_scope",
]
