"""Claims are grounded in the response: spans, and extracted claims with no support are dropped, never judged."""

from __future__ import annotations

import json

from debate import DebateConfig, Verifier, VerifierConfig
from debate.claims import ground_claims
from debate.config import RetrievalConfig
from debate.plugins import TaskInput
from debate.sentences import sentence_spans
from debate.testing import ScriptedChatClient
from debate.types import Claim
from tests.support.helpers import op

SUMMARY = (
    "Palestine joined the International Criminal Court on Wednesday. The move gives the court jurisdiction over "
    "alleged crimes in Palestinian territories."
)
DOCUMENT = "Palestine formally became the 123rd member of the International Criminal Court on Wednesday."


def test_sentence_spans_point_into_the_text() -> None:
    spans = sentence_spans(SUMMARY)
    assert [SUMMARY[s.start : s.end] for s in spans] == [
        "Palestine joined the International Criminal Court on Wednesday.",
        "The move gives the court jurisdiction over alleged crimes in Palestinian territories.",
    ]


def test_fuzzy_alignment_and_drop() -> None:
    claims = [
        Claim(id="c0", text="Palestine joined the International Criminal Court.", kind="atomic"),
        Claim(id="c1", text="The court has jurisdiction over crimes in Palestinian territories.", kind="atomic"),
        Claim(id="c2", text="Marie Curie was born in Warsaw.", kind="atomic"),  # the extraction prompt's example
    ]
    grounded = ground_claims(claims, SUMMARY, may_drop=True)
    assert grounded.dropped == ["Marie Curie was born in Warsaw."]
    assert [c.id for c in grounded.claims] == ["c0", "c1"]
    first, second = grounded.claims
    assert SUMMARY[first.spans[0].start : first.spans[0].end] == "Palestine joined the International Criminal Court"
    assert [SUMMARY[s.start : s.end] for s in second.spans] == [
        "The move gives the court jurisdiction over alleged crimes in Palestinian territories."
    ]
    kept = ground_claims(claims, SUMMARY, may_drop=False)  # the caller's own claims are never dropped
    assert len(kept.claims) == 3 and kept.claims[2].spans == []


async def test_an_unsupported_extracted_claim_is_never_judged() -> None:
    extracted = ["Palestine joined the International Criminal Court.", "Marie Curie was born in Warsaw."]
    client = ScriptedChatClient({"extract": [json.dumps({"claims": extracted})], "debate": [op(True)]})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), retrieval=RetrievalConfig(retriever="bm25")
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput(SUMMARY, reference=DOCUMENT), task="summarization")
    assert [c.text for c in report.claims] == [extracted[0]]
    assert report.claims[0].spans and report.extraction.dropped == [extracted[1]]
    assert report.note is not None and "1 extracted claim(s) dropped" in report.note
    assert client.purposes() == ["extract", "debate:initial"] and client.remaining == 0


async def test_qa_and_rag_claims_carry_their_spans() -> None:
    client = ScriptedChatClient({"debate": [op(True)] * 3})
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0))
    answer = "Paris is the capital of France [1]. The Seine flows through Paris [2]."
    async with Verifier(config=config, client=client) as verifier:
        qa = await verifier.verify(
            TaskInput("  Paris ", question="Capital of France?", reference="Paris is the capital.")
        )
        rag = await verifier.verify(
            TaskInput(answer, reference={"1": "Paris is the capital.", "2": "The Seine."}), task="rag"
        )
    assert [(s.start, s.end) for s in qa.claims[0].spans] == [(2, 7)]
    assert [answer[s.start : s.end] for c in rag.claims for s in c.spans] == [
        "Paris is the capital of France [1].",
        "The Seine flows through Paris [2].",
    ]
