"""Bounded strings for grammar-constrained replies: a small model cannot write one string until the token limit cuts
the reply, and the token limit always leaves room for the rest of the object."""

from __future__ import annotations

import json
from typing import Any

from debate.calls import OPINION_SCHEMA
from debate.config import ModelConfig
from debate.llm import ChatMessage, ChatRequest
from debate.llm._bounds import bounded_strings, worst_case_tokens
from debate.llm._openai_client import OpenAIChatClient
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op

REQUEST = ChatRequest(messages=[ChatMessage(role="user", content="x")], response_schema=OPINION_SCHEMA)


def test_every_string_is_bounded_and_tighter_bounds_are_kept() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 40}},
        },
    }
    bounded = bounded_strings(schema, 300)
    assert bounded["properties"]["a"]["maxLength"] == 300 and bounded["properties"]["b"]["items"]["maxLength"] == 40
    assert "maxLength" not in schema["properties"]["a"]  # the caller's schema is not changed


def test_worst_case_counts_one_token_per_character_and_knows_what_is_unbounded() -> None:
    assert worst_case_tokens(OPINION_SCHEMA) is None  # the opinion string has no bound of its own
    bounded = bounded_strings(OPINION_SCHEMA, 300)
    worst = worst_case_tokens(bounded)
    assert worst is not None and 300 + len('{"opinion":"","factuality":false,"Error severity":5}') <= worst < 600
    assert worst_case_tokens({"type": "array", "items": {"type": "string", "maxLength": 5}}) is None  # no maxItems


async def test_the_client_sends_bounded_strings_and_a_token_limit_that_fits() -> None:
    with FakeOpenAI(script=[Reply(content=op(True)), Reply(content=op(True))]) as server:
        settings: dict[str, Any] = {
            "base_url": server.base_url,
            "model": "fake-model",
            "structured_output": "json_object",
            "max_tokens": 256,
        }
        for extra in ({"max_string_chars": 300}, {}):
            client = OpenAIChatClient(config=ModelConfig(**settings, **extra))
            try:
                await client.complete(REQUEST)
            finally:
                await client.aclose()
    first, second = server.requests
    schema = first["response_format"]["schema"]
    assert schema["properties"]["opinion"]["maxLength"] == 300
    worst = worst_case_tokens(schema)
    assert worst is not None and first["max_tokens"] == worst > 256  # raised to the schema's worst case
    assert "maxLength" not in json.dumps(second["response_format"]) and second["max_tokens"] == 256
