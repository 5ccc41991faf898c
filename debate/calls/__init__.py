"""Structured model calls, the toolkit every stage shares: prompts as declared files (`prompts/`, with their
variables and sha256), a conversation that re-asks an unusable reply with the parse error (bounded), and the
parsers of the replies (JSON objects, an agent's opinion, a factuality verdict)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from debate.calls._parsing import (
        OPINION_FORMAT,
        OPINION_FORMAT_THREE_WAY,
        OPINION_SCHEMA,
        OPINION_SCHEMA_THREE_WAY,
        load_json_object,
        parse_factuality,
        parse_opinion,
    )
    from debate.calls._prompts import DEFAULT_PROMPT_SET, PROMPT_SETS, PromptTemplate, load_prompt
    from debate.calls._structured import (
        ChatConversation,
        Conversation,
        Structured,
        ask_structured,
        call_info,
        converse,
    )
    from debate.errors import PromptError

_WHERE = {
    **dict.fromkeys(
        [
            "OPINION_FORMAT",
            "OPINION_FORMAT_THREE_WAY",
            "OPINION_SCHEMA",
            "OPINION_SCHEMA_THREE_WAY",
            "load_json_object",
            "parse_factuality",
            "parse_opinion",
        ],
        "debate.calls._parsing",
    ),
    **dict.fromkeys(["DEFAULT_PROMPT_SET", "PROMPT_SETS", "PromptTemplate", "load_prompt"], "debate.calls._prompts"),
    **dict.fromkeys(
        ["ChatConversation", "Conversation", "Structured", "ask_structured", "call_info", "converse"],
        "debate.calls._structured",
    ),
    "PromptError": "debate.errors",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "DEFAULT_PROMPT_SET",
    "OPINION_FORMAT",
    "OPINION_FORMAT_THREE_WAY",
    "OPINION_SCHEMA",
    "OPINION_SCHEMA_THREE_WAY",
    "PROMPT_SETS",
    "ChatConversation",
    "Conversation",
    "PromptError",
    "PromptTemplate",
    "Structured",
    "ask_structured",
    "call_info",
    "converse",
    "load_json_object",
    "load_prompt",
    "parse_factuality",
    "parse_opinion",
]
