"""Three-way claim labels: how the debate reaches not-enough-evidence, and RefChecker's output shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.plugins import TaskInput
from debate.results import parse_record, refchecker_item
from debate.testing import ScriptedChatClient
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import REFCHECKER_EXAMPLE, debate, op


def _refchecker_item(record: dict[str, Any], *args: Any) -> dict[str, Any]:
    """refchecker_item on a results-log record written as JSON (the log's own shape)."""
    return refchecker_item(parse_record(record), *args)


SILENT = json.dumps(
    {"opinion": "The evidence is silent.", "factuality": True, "Error severity": 0, "enough evidence": False}
)


def config(prompt_set: str, rounds: int = 1) -> VerifierConfig:
    return VerifierConfig(prompt_set=prompt_set, debate=DebateConfig(min_rounds=rounds, max_rounds=rounds))


async def test_refchecker_prompt_set_reaches_not_enough_evidence() -> None:
    client = ScriptedChatClient({"debate": [SILENT] * 4})
    async with Verifier(config=config("refchecker"), client=client) as verifier:
        report = await verifier.verify(
            TaskInput("Paris", question="Capital of France?", reference="France is in Europe.")
        )
    claim = report.claims[0]
    assert (claim.status, claim.label, claim.factual) == ("verified", "not_enough_evidence", None)
    assert (report.verdict, report.factual, report.ratios.not_enough_evidence) == ("not_enough_evidence", None, 1.0)
    first, trust = client.calls[0].request, client.calls[1].request
    assert first.response_schema is not None and first.response_schema["properties"]["enough evidence"] == {
        "type": "boolean"
    }
    assert '"enough evidence": False' in first.messages[-1].content
    # The next agent sees the previous agent's answer with the flag.
    assert '"enough evidence": false' in trust.messages[-1].content
    assert report.meta.prompt_set == "refchecker"


async def test_the_leader_decides_the_label() -> None:
    """Earlier agents may say the evidence cannot decide; the claim's label is the final Leader's."""
    client = ScriptedChatClient({"debate:initial": [SILENT], "debate": [SILENT, SILENT, op(False, 3)]})
    async with Verifier(config=config("refchecker"), client=client) as verifier:
        report = await verifier.verify(
            TaskInput("Paris", question="Capital of France?", reference="France is in Europe.")
        )
    assert (report.claims[0].label, report.verdict) == ("non_factual", "non_factual")


async def test_the_paper_set_has_two_labels() -> None:
    client = ScriptedChatClient({"debate": [op(True)] * 4})
    async with Verifier(config=config("paper"), client=client) as verifier:
        report = await verifier.verify(
            TaskInput("Paris", question="Capital of France?", reference="Paris is in France.")
        )
    request = client.calls[0].request
    assert request.response_schema is not None and "enough evidence" not in request.response_schema["properties"]
    assert "enough evidence" not in request.messages[-1].content
    assert report.claims[0].label == "factual"


@pytest.mark.slow  # runs the `debate` command
def test_refchecker_example_round_trip(tmp_path: Path) -> None:
    """RefChecker's example input in, RefChecker's output shape out: input fields kept, claims, Y and ys."""
    source, out = tmp_path / "example_in.json", tmp_path / "example_out.json"
    items = REFCHECKER_EXAMPLE
    source.write_text(json.dumps(items, indent=2))

    def debated(call: Call) -> Reply:
        # A rule-based agent: the evidence about the tower says nothing of the claim.
        return Reply(content=SILENT if "Tower opened in 1889" in json.dumps(call.body["messages"]) else op(True))

    extracted = Reply(content=json.dumps({"claims": ["Paris is the capital of France."]}))
    with FakeOpenAI(routes={"extract": lambda call: extracted, "debate": debated}) as server:
        args = [
            "verify",
            "--input",
            str(source),
            "--output",
            str(out),
            "--output-format",
            "refchecker",
            "--model.base-url",
            server.base_url,
            "--debate.min-rounds",
            "0",
            "--task",
            "general",
            "--retrieval.retriever",
            "bm25",
            "--prompt-set",
            "refchecker",
            "--aggregator",
            "major",
        ]
        done = debate(*args)
        assert done.returncode == 0, done.stderr
    written = json.loads(out.read_text())
    # The input's fields as given (RefChecker's items have no id), then claims, Y and ys.
    assert [sorted(item) for item in written] == [["Y", "claims", "question", "reference", "response", "ys"]] * 2
    assert written[1]["claims"] == items[1]["claims"]
    assert written[0]["ys"] == ["Entailment"] * len(written[0]["claims"]) and written[0]["Y"] == "Entailment"
    assert written[1]["ys"] == ["Entailment", "Neutral"] and written[1]["Y"] == "Entailment"  # tie: first met
    assert (tmp_path / "example_out.json.jsonl").is_file()
    assert "RefChecker rates over 2 responses: Entailment 0.750, Neutral 0.250, Contradiction 0.000" in done.stdout


def test_refchecker_shape_keeps_failures_apart() -> None:
    failure = {"kind": "model_unavailable", "message": "503", "stage": "debate", "transient": True}
    verified = {
        "claim_id": "c0",
        "text": "a",
        "status": "verified",
        "label": "factual",
        "factual": True,
        "error_severity": 0,
        "evidence": [],
        "debate": None,
    }
    failed: dict[str, Any] = {
        "claim_id": "c1",
        "text": "b",
        "status": "unverifiable",
        "factual": None,
        "reason": "503",
        "failure": failure,
        "evidence": [],
        "debate": None,
    }
    meta: dict[str, Any] = {
        "model": "m",
        "base_url": None,
        "embedded": False,
        "config": {},
        "prompts": {},
        "seed": 0,
        "package_version": "0",
        "git_commit": None,
        "created_at": "2026-01-01T00:00:00Z",
    }
    result = {
        "task": "general",
        "question": None,
        "response": "a. b.",
        "factual": None,
        "verdict": "unverifiable",
        "rollup": "soft",
        "ratios": {"factual": 0.5, "non_factual": 0, "unverifiable": 0.5},
        "extraction": {"method": "given"},
        "claims": [verified, failed],
        "usage": {},
        "elapsed_s": 0,
        "meta": meta,
    }
    item = _refchecker_item({"id": "7", "response": "a. b.", "line": 1, "result": result})
    assert item["ys"] == ["Entailment", None] and item["Y"] is None and item["failed_claims"] == ["c1"]
    assert "result" not in item and "line" not in item and item["id"] == "7"
    error = _refchecker_item({"response": "x", "line": 2, "error": {"kind": "input", "message": "bad"}})
    assert error == {"response": "x", "Y": None, "ys": [], "error": {"kind": "input", "message": "bad"}}
