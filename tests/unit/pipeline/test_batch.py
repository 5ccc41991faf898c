"""run_batch directly, with a scripted client: task-aware batches keep going past per-line failures."""

from __future__ import annotations

import json
from pathlib import Path

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import RetrievalConfig
from debate.results import run_batch
from debate.testing import ScriptedChatClient
from tests.support.helpers import op


def _claims(text: str) -> str:
    return json.dumps({"claims": [text]})


EXTRACTED = {"extract@a": [_claims("Paris is in France.")], "extract@c": [_claims("Lyon is in France.")]}
"""The extractor's replies for the first and last items (one claim each: the response itself)."""


def _three_items(tmp_path: Path, middle: str) -> tuple[Path, Path]:
    """A summarization batch whose middle item has the response `middle`; returns (input, output) paths."""
    source = tmp_path / "in.jsonl"
    rows = [
        {"id": "a", "response": "Paris is in France.", "reference": "Paris is the capital of France."},
        {"id": "b", "response": middle, "reference": "Some document."},
        {"id": "c", "response": "Lyon is in France.", "reference": "Lyon is a French city."},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return source, tmp_path / "out.jsonl"


async def test_extraction_failure_is_recorded_and_the_batch_goes_on(tmp_path: Path) -> None:
    source, out = _three_items(tmp_path, "Broken extraction.")

    script: dict[str, list[str]] = {
        **EXTRACTED,
        "extract@b": ["not json", "still not json", "still not json"],
        "debate": [op(True)] * 2,
    }
    client = ScriptedChatClient(script)
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        retrieval=RetrievalConfig(retriever="bm25"),
        claim_concurrency=1,
    )
    async with Verifier(config=config, client=client) as verifier:
        summary = await run_batch(
            verifier=verifier, input_path=source, output_path=out, items_in_flight=1, task="summarization"
        )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b", "c"]
    failure = records[1]["result"]["failure"]
    assert failure["kind"] == "extraction_failed" and failure["stage"] == "extraction"
    assert failure["message"].startswith("claim extraction failed: no usable reply after 3 attempts")
    assert records[1]["result"]["verdict"] == "unverifiable" and records[1]["result"]["claims"] == []
    assert records[0]["result"]["task"] == "summarization" and records[2]["result"]["verdict"] == "factual"
    assert (summary.processed, summary.failed, summary.factual) == (3, 1, 2)
    assert client.remaining == 0 and [c.item for c in client.calls if c.request.purpose == "extract"] == [
        "a",
        "b",
        "b",
        "b",
        "c",
    ]


async def test_a_503_during_extraction_fails_that_item_only(tmp_path: Path) -> None:
    """An endpoint outage while one item's claims are extracted gives that item a typed, transient failure; the
    other items of the batch are verified."""
    from tests.support.fakes import FakeOpenAI, Reply, Route

    source, out = _three_items(tmp_path, "Outage here.")

    routes: dict[str, Route] = {
        **{key: [Reply(content=r) for r in replies] for key, replies in EXTRACTED.items()},
        "extract@b": lambda call: Reply(status=503, error_message="upstream down"),
        "debate": lambda call: Reply(content=op(True)),
    }
    from debate.config import ModelConfig

    with FakeOpenAI(routes=routes) as server:
        config = VerifierConfig(
            model=ModelConfig(base_url=server.base_url, model="fake-model", max_attempts=2, backoff_initial_s=0.01),
            debate=DebateConfig(min_rounds=0, max_rounds=0),
            retrieval=RetrievalConfig(retriever="bm25"),
        )
        async with Verifier(config=config) as verifier:
            summary = await run_batch(
                verifier=verifier, input_path=source, output_path=out, items_in_flight=2, task="summarization"
            )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b", "c"]
    assert [r["result"]["verdict"] for r in records] == ["factual", "unverifiable", "factual"]
    failure = records[1]["result"]["failure"]
    assert failure["kind"] == "model_unavailable" and failure["transient"] is True
    assert "503" in failure["message"] and failure["stage"] == "extraction"
    assert records[0]["result"]["failure"] is None and records[2]["result"]["claims"][0]["factual"] is True
    assert (summary.processed, summary.failed, summary.factual) == (3, 1, 2)


def test_a_lone_surrogate_is_an_error_on_its_item_and_the_next_item_is_read(tmp_path: Path) -> None:
    """JSON may escape half a UTF-16 pair ("\\ud800"): such an item is named as not valid Unicode, in both input
    formats, instead of failing the whole file when it is encoded (issue 37)."""
    from debate.results import read_items

    good = {
        "id": "g",
        "response": "Paris is in France.",
        "question": "Where is Paris?",
        "reference": "Paris is in France.",
    }
    bad = '{"response": "\\ud800", "question": "q", "reference": "r"}'
    array, lines = tmp_path / "items.json", tmp_path / "items.jsonl"
    array.write_text(f"[{bad}, {json.dumps(good)}]")
    lines.write_text(f"{bad}\n{json.dumps(good)}\n")
    for path, unit in ((array, "item"), (lines, "line")):
        (first, none, error), (second, item, no_error) = list(read_items(path))
        assert (first, none, error) == (1, None, f"{unit} 1: a string holds a lone surrogate (not valid Unicode)")
        assert second == 2 and item is not None and item.response == good["response"] and no_error is None


def test_a_number_too_long_to_read_is_an_error_on_its_item_alone(tmp_path: Path) -> None:
    """Issue 44: a 5,000-digit number (past Python's 4,300-digit limit) in one item of a JSONL file or a JSON
    array is that item's error; the others are read."""
    from debate.results import read_items

    big = "9" * 5_000
    lines = tmp_path / "in.jsonl"
    lines.write_text(f'{{"id": "a", "response": "x", "n": {big}}}\n{{"id": "b", "response": "y"}}\n')
    array = tmp_path / "in.json"
    array.write_text(f'[{{"response": "x", "extra": [{{"n": -{big}}}]}}, {{"response": "y"}}]')
    for path, unit in ((lines, "line"), (array, "item")):
        read = list(read_items(path))
        assert read[0][1] is None and read[0][2] == f"{unit} 1: a number has more than 4300 digits", read[0]
        assert read[1][1] is not None and read[1][1].response == "y"
