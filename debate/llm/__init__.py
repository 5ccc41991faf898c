"""Model I/O: one client interface (debate.types.ChatClient), one SDK-facing implementation, the embedded default,
the call cache, shared rate limits and tracing. The heavier parts (the HTTP client, the embedded server) are imported
on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports
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

if TYPE_CHECKING:
    from debate.llm._cache import (
        CACHE_FILE,
        DEFAULT_CACHE_DIR,
        CacheStats,
        CachingChatClient,
        cache_stats,
        clear_cache,
    )
    from debate.llm._embedded import (
        EMBEDDED_MAX_STRING_CHARS,
        EMBEDDED_MODEL_NAME,
        EMBEDDED_STILL_WAITING_S,
        EMBEDDED_TIMEOUT_S,
        EmbeddedServer,
        embedded_model_config,
        embedded_model_path,
        last_call_rate,
        record_call_rate,
    )
    from debate.llm._openai_client import OpenAIChatClient, env_proxy, is_hosted
    from debate.llm._ratelimit import RateLimiter, SharedRates, adopt_shared, shared_rates
    from debate.llm._routed import RoleRoutedClient, role_of
    from debate.llm._traced import TracedChatClient

_WHERE = {
    **dict.fromkeys(
        ["CACHE_FILE", "DEFAULT_CACHE_DIR", "CacheStats", "CachingChatClient", "cache_stats", "clear_cache"],
        "debate.llm._cache",
    ),
    **dict.fromkeys(
        [
            "EMBEDDED_MAX_STRING_CHARS",
            "EMBEDDED_MODEL_NAME",
            "EMBEDDED_STILL_WAITING_S",
            "EMBEDDED_TIMEOUT_S",
            "EmbeddedServer",
            "embedded_model_config",
            "embedded_model_path",
            "env_proxy",
            "last_call_rate",
            "record_call_rate",
            "role_of",
        ],
        "debate.llm._embedded",
    ),
    **dict.fromkeys(["OpenAIChatClient", "env_proxy", "is_hosted"], "debate.llm._openai_client"),
    **dict.fromkeys(["RateLimiter", "SharedRates", "adopt_shared", "shared_rates"], "debate.llm._ratelimit"),
    "TracedChatClient": "debate.llm._traced",
    "RoleRoutedClient": "debate.llm._routed",
    "role_of": "debate.llm._routed",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "CACHE_FILE",
    "DEFAULT_CACHE_DIR",
    "EMBEDDED_MAX_STRING_CHARS",
    "EMBEDDED_MODEL_NAME",
    "EMBEDDED_STILL_WAITING_S",
    "EMBEDDED_TIMEOUT_S",
    "CacheStats",
    "CachingChatClient",
    "ChatClient",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "ContextTooLongError",
    "EmbeddedServer",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "OpenAIChatClient",
    "RateLimiter",
    "RoleRoutedClient",
    "SharedRates",
    "TokenLogprob",
    "TopLogprob",
    "TracedChatClient",
    "adopt_shared",
    "cache_stats",
    "clear_cache",
    "current_item",
    "embedded_model_config",
    "embedded_model_path",
    "env_proxy",
    "is_hosted",
    "item_scope",
    "last_call_rate",
    "record_call_rate",
    "role_of",
    "shared_rates",
]
