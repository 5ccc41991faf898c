"""run_batch directly, with a scripted client: task-aware batches keep going past per-line failures."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import op

from debate import DebateConfig, Verifier, VerifierConfig
from debate.batch import run_batch
from debate.config import RetrievalConfig
from debate.llm import ChatRequest
from debate.testing import ScriptedChatClient


async def test_extraction_failure_is_recorded_and_the_batch_goes_on(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [
        {"id": "a", "response": "Paris is in France.", "reference": "Paris is the capital of France."},
        {"id": "b", "response": "Broken extraction.", "reference": "Some document."},
        {"id": "c", "response": "Lyon is in France.", "reference": "Lyon is a French city."},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def reply(request: ChatRequest) -> str:
        text = request.messages[-1].content
        if "Your reply could not be used" in text:
            return "still not json"
        if request.messages[0].content.startswith("You extract"):
            if "Broken extraction" in text:
                return "not json"
            return json.dumps({"claims": [text.split("Text: ")[-1].split("\n")[0]]})
        return op(True)

    client = ScriptedChatClient([reply] * 20)
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        retrieval=RetrievalConfig(retriever="bm25"),
        concurrency=1,
    )
    async with Verifier(config=config, client=client) as verifier:
        summary = await run_batch(
            verifier=verifier, input_path=source, output_path=out, concurrency=1, task="summarization"
        )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b", "c"]
    assert records[1]["error"]["kind"] == "extraction"
    assert records[1]["error"]["message"].startswith(
        "line 2: claim extraction failed: no usable reply after 3 attempts"
    )
    assert records[0]["result"]["task"] == "summarization" and records[2]["result"]["verdict"] == "factual"
    assert (summary.processed, summary.errors, summary.factual) == (3, 1, 2)
