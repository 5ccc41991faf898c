"""The one interface for model I/O: requests, responses (text, usage, logprobs) and errors, in our own types (the
models and the ChatClient protocol live in debate.types, below every stage and the plugin API)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from debate.errors import ContextTooLongError, ModelError, ModelRequestError, ModelUnavailableError
from debate.types import ChatClient, ChatMessage, ChatRequest, ChatResponse, TokenLogprob, TopLogprob

__all__ = [
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

_ITEM: ContextVar[str | None] = ContextVar("debate_item", default=None)


@contextmanager
def item_scope(item_id: str | None) -> Iterator[None]:
    """Model calls made inside (in this task and the tasks it starts) are made for this item: the endpoint client
    sends its id as X-Debate-Item and the scripted client records and routes by it. A proxy's log can then tell
    a batch's items apart, and a scripted endpoint can fail one item without reading any prompt."""
    token = _ITEM.set(item_id)
    try:
        yield
    finally:
        _ITEM.reset(token)


def current_item() -> str | None:
    """The id of the item whose work is running (see item_scope), if any."""
    return _ITEM.get()
