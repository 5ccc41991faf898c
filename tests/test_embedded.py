"""The real embedded model (SmolLM2-135M on llama.cpp) end to end. It proves the pipeline runs; it says nothing
about the method's accuracy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig

pytestmark = pytest.mark.embedded

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
KNOWLEDGE = (
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia in the 19th "
    "century. First for Women is a woman's magazine published by Bauer Media Group in the USA. It was started in 1989."
)


def test_cli_verifies_on_the_embedded_model_with_no_endpoint() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    done = subprocess.run(
        [sys.executable, "-m", "debate.cli", "verify", "--question", QUESTION, "--answer", "First for Women",
         "--evidence", KNOWLEDGE, "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "embedded" in done.stderr and "SmolLM2" in done.stderr
    report = json.loads(done.stdout)
    assert report["meta"]["embedded"] is True and report["meta"]["model"].startswith("SmolLM2-135M")
    assert report["meta"]["base_url"].startswith("http://127.0.0.1:")
    claim = report["claims"][0]
    # The grammar-constrained JSON reply always parses, so every turn yields an opinion.
    assert claim["status"] == "verified" and isinstance(claim["factual"], bool)
    assert report["factual"] is claim["factual"]
    debate = claim["debate"]
    assert 2 <= debate["rounds"] <= 5
    assert debate["states"][0]["name"] == "S0" and all(s["name"] in ("S1", "S2") for s in debate["states"][1:])
    for state in debate["states"][1:]:
        assert [t["role"] for t in state["turns"]][-1] == "leader" and len(state["turns"]) == 3
    assert report["usage"]["llm_calls"] == 1 + 3 * debate["rounds"]
    assert report["usage"]["prompt_tokens"] > 0 and report["usage"]["completion_tokens"] > 0


async def test_api_on_the_embedded_server_records_every_turn(embedded_server: str) -> None:
    config = VerifierConfig(
        model=ModelConfig(base_url=embedded_server, structured_output="json_object", max_concurrency=1),
        debate=DebateConfig(min_rounds=1, max_rounds=2, transition="always-trust"),
    )
    async with Verifier(config=config) as verifier:
        report = await verifier.verify("Arthur's Magazine", question=QUESTION, reference=KNOWLEDGE)
    claim = report.claims[0]
    assert claim.status == "verified"
    assert claim.debate is not None
    assert [s.name for s in claim.debate.states][1:] == ["S1"] * claim.debate.rounds
    turns = [t for s in claim.debate.states for t in s.turns]
    assert all(t.opinion and t.call.usage.llm_calls >= 1 and t.call.latency_s > 0 for t in turns)
    assert report.meta.model == "SmolLM2-135M-Instruct-Q4_1" and report.meta.embedded is False


async def test_summarization_item_end_to_end(embedded_server: str) -> None:
    """Extraction, dense top-10 retrieval over a real HaluEval document, and a debate per claim, all for real."""
    from pathlib import Path

    from debate.config import ClaimConfig, RetrievalConfig

    record = json.loads((Path(__file__).parent / "fixtures" / "halueval_summarization_icc.jsonl").read_text())
    summary = (
        "Membership gives the ICC jurisdiction over alleged crimes committed in Palestinian territories since "
        "last June. Israel and the United States supported the move."
    )
    config = VerifierConfig(
        model=ModelConfig(base_url=embedded_server, structured_output="json_object", max_concurrency=1),
        debate=DebateConfig(min_rounds=1, max_rounds=1),
        claims=ClaimConfig(max_claims=2),
        retrieval=RetrievalConfig(retriever="dense", top_k=10),
    )
    async with Verifier(config=config) as verifier:
        report = await verifier.verify(summary, reference=record["document"], task="summarization")
    assert report.task == "summarization" and report.extraction.method == "llm-sentences"
    assert 1 <= len(report.claims) <= 2
    document = record["document"]
    for claim in report.claims:
        assert len(claim.evidence) == 10
        assert all(e.kind == "document" and e.text in document for e in claim.evidence)
        assert claim.status == "verified" and claim.debate is not None and claim.debate.rounds == 1
    assert report.usage.llm_calls == 1 + 4 * len(report.claims)
    assert report.score is not None and report.verdict in ("factual", "non_factual")


async def test_logprob_check_reads_real_logprobs_from_llama_cpp(embedded_server: str) -> None:
    from debate.llm.openai_client import OpenAIChatClient
    from debate.prefilter import LogprobGroundingCheck

    client = OpenAIChatClient(config=ModelConfig(base_url=embedded_server))
    await client.resolve_model()
    check = LogprobGroundingCheck(client)
    result = await check.check(
        "Paris is the capital of France [1]. The Eiffel Tower stands in Berlin [2].",
        {"1": "Paris is the capital and largest city of France.", "2": "The Eiffel Tower is a tower in Paris."},
    )
    await client.aclose()
    assert result.available is True and result.note is None
    assert [c.citations for c in result.claims] == [["1"], ["2"]]
    for claim in result.claims:
        r = claim.result
        assert 0.0 <= r.p0 <= 1.0 and 0.0 <= r.p1 <= 1.0 and r.has_citations
        assert r.budget_gap_bits == pytest.approx(r.required_bits - r.observed_bits)
    assert result.usage.llm_calls == 4 and result.grounded is not None
