"""The schema-driven test client (debate.testing.SchemaChatClient): every structured request a stage sends declares a
schema whose simplest instance that stage's parser accepts at the first attempt."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calls import OPINION_SCHEMA, OPINION_SCHEMA_THREE_WAY
from debate.config import PrefilterConfig
from debate.plugins import TaskInput
from debate.prefilter._judge import JUDGE_SCHEMA
from debate.testing import SchemaChatClient

PARIS = "Paris is the capital of France."


def test_the_simplest_instance_of_a_schema() -> None:
    client = SchemaChatClient(values={"factuality": False})
    assert client.instance(OPINION_SCHEMA) == {"opinion": "a", "factuality": False, "Error severity": 0}
    three_way = client.instance(OPINION_SCHEMA_THREE_WAY)
    assert "enough evidence" not in three_way  # only required properties
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["x", "y"]},
            "n": {"type": "integer", "minimum": 2},
            "items": {"type": "array", "minItems": 2, "items": {"type": "string", "minLength": 3}},
            "either": {"anyOf": [{"type": "number", "minimum": 0.5}, {"type": "string"}]},
            "skipped": {"type": "string"},
        },
        "required": ["kind", "n", "items", "either"],
    }
    value = client.instance(schema)
    assert value == {"kind": "x", "n": 2, "items": ["aaa", "aaa"], "either": 0.5}
    jsonschema.validate(value, schema)
    jsonschema.validate(client.instance(JUDGE_SCHEMA), JUDGE_SCHEMA)


async def test_a_value_the_schema_forbids_is_refused_not_sent() -> None:
    from debate.llm import ChatMessage, ChatRequest

    client = SchemaChatClient(values={"Error severity": 9})
    request = ChatRequest(messages=[ChatMessage(role="user", content="x")], response_schema=OPINION_SCHEMA)
    with pytest.raises(jsonschema.ValidationError, match="9 is greater than the maximum of 5"):
        await client.complete(request)


CASES: list[tuple[str, dict[str, Any], dict[str, Any], set[str]]] = [
    ("qa", {"question": "Capital of France?", "reference": PARIS}, {}, {"debate:initial"}),
    ("summarization", {"reference": PARIS + " It lies on the Seine."}, {}, {"extract", "debate:initial"}),
    ("dialogue", {"question": "A: Where should I go?", "reference": PARIS}, {}, {"extract", "debate:initial"}),
    ("general", {"reference": PARIS}, {"prefilters": ["logprob"]}, {"extract", "debate:initial"}),
    (
        "rag",
        {"question": "Capital of France?", "reference": {"1": PARIS}},
        {"prefilters": ["rules", "rag-judge"], "options": {"rag-judge": {"when": "always"}}},
        {"rag-judge", "debate:initial"},
    ),
]


@pytest.mark.parametrize(("task", "item", "prefilters", "structured"), CASES, ids=[c[0] for c in CASES])
async def test_every_declared_schema_is_one_its_parser_accepts(
    task: str, item: dict[str, Any], prefilters: dict[str, Any], structured: set[str]
) -> None:
    client = SchemaChatClient(values={"claims": [PARIS]}, text=PARIS)
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=1), prefilter=PrefilterConfig(**prefilters))
    async with Verifier(config=config, client=client) as verifier:
        response = PARIS + " [1]" if task == "rag" else PARIS
        report = await verifier.verify(TaskInput(response, **item), task=task)
    assert report.failure is None and report.claims, report.note
    assert all(c.status == "verified" and c.factual is True for c in report.claims)
    sites = [c.request.site or "" for c in client.calls]
    assert not any(site.endswith("#2") for site in sites)  # nothing was re-asked
    assert {c.request.purpose for c in client.calls if c.request.response_schema is not None} == structured
