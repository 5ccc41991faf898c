"""RefChecker's evidence localization (seed 004 "Evidence Localization"): the evidence sentences a claim's verdict
rests on, per element of its triplet, with the role its label gives them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import ClaimConfig, RetrievalConfig
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import debate, op

DOCUMENT = (
    "Eleanor Arnason (born 1945) is an American science fiction and fantasy writer. She is best known for her novel "
    "A Woman of the Iron People (1991), which won the James Tiptree, Jr. Award. Her other works include Ring of "
    "Swords (1993)."
)


async def test_each_triplet_element_is_localized_in_the_evidence_with_the_labels_role() -> None:
    triplets = [["Eleanor Arnason", "born", "1945"], ["A Woman of the Iron People", "won", "Nebula Award"]]
    client = ScriptedChatClient({"extract": [json.dumps({"triplets": triplets})], "debate@x": [op(True), op(False, 4)]})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        claims=ClaimConfig(format="triplet"),
        retrieval=RetrievalConfig(retriever="bm25", top_k=3),
        localize=True,
        claim_concurrency=1,
    )
    response = "Eleanor Arnason was born 1945. A Woman of the Iron People won Nebula Award."
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput(response, reference=DOCUMENT, id="x"), task="summarization")
    born, award = report.claims
    assert [(e.element, e.role) for e in born.localized] == [
        ("subject", "supports"),
        ("predicate", "supports"),
        ("object", "supports"),
    ]
    assert born.localized[2].text.startswith("Eleanor Arnason (born 1945)")
    assert {e.role for e in award.localized} == {"contradicts"}
    assert any("A Woman of the Iron People" in e.text for e in award.localized)
    for claim in report.claims:  # every located sentence points into its evidence item
        for e in claim.localized:
            assert claim.evidence[e.evidence].text[e.start : e.end] == e.text


async def test_localization_is_off_by_default_and_skips_unverified_claims() -> None:
    client = ScriptedChatClient({"debate": ["no json", "no json", "no json"]})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0, max_parse_retries=2),
        localize=True,
        retrieval=RetrievalConfig(retriever="bm25"),
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput("Arnason was born in 1945.", question="Born?", reference=DOCUMENT))
    assert report.claims[0].label is None and report.claims[0].localized == []
    assert VerifierConfig().localize is False


@pytest.mark.slow
def test_the_cli_shows_what_each_claim_rests_on(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text(DOCUMENT)

    def agree(call: Call) -> Reply:
        return Reply(content=op(True))

    with FakeOpenAI(routes={"debate": agree}) as server:
        done = debate(
            "verify",
            "--question",
            "When was Eleanor Arnason born?",
            "--answer",
            "She was born in 1945.",
            "--evidence",
            f"@{tmp_path / 'doc.txt'}",
            "--debate.min-rounds",
            "0",
            "--localize",
            "--retrieval.retriever",
            "bm25",
            "--model.base-url",
            server.base_url,
        )
    assert done.returncode == 0, done.stderr
    assert "supports (claim): [1] Eleanor Arnason (born 1945) is an American" in done.stdout
