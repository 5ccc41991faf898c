"""A reply fuzzer over every parser of a model reply: whatever the text, a parser returns a value or raises
ReplyUnusableError (which re-asks, then marks the claim unverifiable); nothing else may escape.

CI runs a fixed, derandomized sample; DEBATE_FUZZ_EXAMPLES=20000 (the nightly size) widens it, and
DEBATE_FUZZ_SEED=N draws a different sample."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calls import load_json_object, parse_opinion
from debate.claims._extract import _parse_filtered, _parse_sentences, _parse_triplets
from debate.errors import ReplyUnusableError
from debate.evidence._search import _parse_queries
from debate.plugins import TaskInput
from debate.prefilter._judge import parse_judgment, unsupported_claims
from debate.prefilter._tool_correction import _parse_call
from debate.testing import ScriptedChatClient
from experiments.methods import _parse_factool, halueval_judgement
from tests.support.properties import examples

PARSERS: dict[str, Callable[[str], object]] = {
    "verdict": parse_opinion,
    "json object": load_json_object,
    "claims": _parse_sentences,
    "triplets": _parse_triplets,
    "subjective filter": _parse_filtered,
    "judge": parse_judgment,
    "judge notes": unsupported_claims,
    "queries": lambda reply: _parse_queries(reply, 2),
    "tool call": _parse_call,
    "factool verdict": _parse_factool,
    "halueval judgement": halueval_judgement,
}

EXAMPLES = int(os.environ.get("DEBATE_FUZZ_EXAMPLES", "0")) or examples(3, why="a parser is a pure function")
SEED = int(os.environ.get("DEBATE_FUZZ_SEED", "20261125"))

MEGABYTE = 1 << 20
ADVERSARIAL = [
    "",
    "{",
    "}",
    "{{",
    "}}",
    "{{}}",
    '{{"opinion": "x"}}',
    "{{'a': 1}}",
    "{[1]: 2}",
    "{{1, 2}: 3}",
    '{"opinion": "x", "factuality": true, "Error severity": 1',  # truncated
    '```json\n{"opinion": "ok", "factuality": True, "Error severity": 0}\n```',
    "```" * 5000,
    "{" * MEGABYTE,
    "}" * MEGABYTE,
    "[" * 100_000,
    '{"a":' * 50_000 + "1" + "}" * 50_000,
    "\n" * MEGABYTE,
    "unsupported claim:" + " " * MEGABYTE + "x",
    "x" * MEGABYTE,
    '{"opinion": "' + "a" * MEGABYTE + '", "factuality": false, "Error severity": 3}',
    "{'opinion': 'py', 'factuality': False, 'Error severity': 2,}",
    "{\x00}",
    '{"a\x00": 1}',
    "\ud800{\udfff}",
    '{"opinion": "x", "factuality": "maybe", "Error severity": 9}',
    '{"factuality": 1' + "0" * 5000 + "}",
    "{'a': " + "1" * 5000 + "}",
    '{"claims": [{"claim": {"claim": 1}}]}',
    '{"triplets": [[1, 2, 3]]}',
    '{"queries": [null]}',
    '{"name": 5, "arguments": []}',
    "{'a': (lambda: 1)()}",
    "{**{}}",
    "{'a': 1j}",
    '{"opinion": "\\ud800", "factuality": true, "Error severity": 0}',
    "None",
    "NONE!!!",
    "Yes No",
]

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
_PIECES = st.sampled_from(
    [
        "{",
        "}",
        "{{",
        "}}",
        "[",
        "]",
        '"',
        "'",
        ":",
        ",",
        "\\",
        "```",
        "```json",
        "\n",
        "\x00",
        "\ud800",
        "True",
        "None",
        "factuality",
        '"Error severity"',
        "opinion",
        "Unsupported claim:",
        "1e999",
        "-",
        "*",
        " ",
    ]
)


@st.composite
def replies(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["text", "json", "truncated", "doubled", "python", "pieces"]))
    if kind == "text":
        return draw(st.text())
    value = draw(_JSON)
    text = json.dumps(value) if kind != "python" else repr(value)
    if kind == "truncated":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "doubled":
        return text.replace("{", "{{").replace("}", "}}")
    if kind == "pieces":
        return "".join(draw(st.lists(_PIECES | st.text(max_size=5), max_size=40)))
    return text


def _only_reply_errors(parser: Callable[[str], object], reply: str) -> None:
    try:
        parser(reply)
    except ReplyUnusableError:
        pass


@pytest.mark.parametrize("name", sorted(PARSERS))
@pytest.mark.parametrize("reply", ADVERSARIAL, ids=[f"adversarial{i}" for i in range(len(ADVERSARIAL))])
def test_adversarial_replies_raise_only_the_reply_error(name: str, reply: str) -> None:
    _only_reply_errors(PARSERS[name], reply)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_generated_replies_raise_only_the_reply_error(name: str) -> None:
    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        derandomize="DEBATE_FUZZ_SEED" not in os.environ,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(replies())
    def run(reply: str) -> None:
        _only_reply_errors(PARSERS[name], reply)

    run()


def test_a_python_literal_is_still_read_and_double_braces_are_not_a_reply() -> None:
    opinion = parse_opinion("{'opinion': 'py', 'factuality': False, 'Error severity': 2,}")
    assert (opinion.factuality, opinion.error_severity) == (False, 2)
    with pytest.raises(ReplyUnusableError, match="does not parse"):
        load_json_object('{{"opinion": "x", "factuality": true, "Error severity": 1}}')


@pytest.mark.parametrize("reply", ['{{"opinion": "x"}}', "{[1]: 2}", "{" * 10_000, "[" * 100_000 + "{}"])
async def test_a_reply_of_braces_is_re_asked_then_the_claim_is_unverifiable(reply: str) -> None:
    """The verdict parser's error re-asks (bounded), then the claim is unverifiable: the response does not fail."""
    client = ScriptedChatClient({"debate": [reply, reply, reply]})
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0, max_parse_retries=2))
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(
            TaskInput("It was completed in 1889.", question="When?", reference="Built in 1889.")
        )
    assert report.failure is None and client.remaining == 0
    [claim] = report.claims
    assert claim.label is None and claim.failure is not None and claim.failure.kind == "reply_unusable"
    assert report.verdict == "unverifiable"
