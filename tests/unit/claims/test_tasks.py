"""Each task path with a scripted client: which calls happen, in which order, with which evidence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import ClaimConfig, RetrievalConfig, SearchConfig
from debate.llm import ChatRequest
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from tests.support.helpers import FIXTURES, op

FIXTURE = FIXTURES / "halueval_summarization_icc.jsonl"
RECORD = json.loads(FIXTURE.read_text())

KINDS = {"extract": "extract", "subjective_filter": "filter", "queries": "queries", "debate:initial": "initial"}


def kind_of(request: ChatRequest) -> str:
    """What a call is for, from its declared purpose (never from the prompt's wording)."""
    return KINDS.get(request.purpose, "agent")


def router(replies: dict[str, Callable[[ChatRequest], str] | str], n: int = 50) -> ScriptedChatClient:
    def reply(request: ChatRequest) -> str:
        answer = replies[kind_of(request)]
        return answer(request) if callable(answer) else answer

    return ScriptedChatClient([reply] * n)


def verifier(client: ScriptedChatClient, **overrides: object) -> Verifier:
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0), claim_concurrency=1, **overrides)
    return Verifier(config=config, client=client)


def evidence_of(request: ChatRequest) -> str:
    text = request.messages[-1].content
    return text.split("Evidence:\n", 1)[1].split("\n\nClaim:", 1)[0]


async def test_qa_makes_no_extraction_call() -> None:
    client = router({"initial": op(True)})
    async with verifier(client) as v:
        report = await v.verify(
            TaskInput("Paris", question="Capital of France?", reference="Paris is the capital."), task="qa"
        )
    assert [kind_of(c.request) for c in client.calls] == ["initial"]
    assert (
        report.extraction.method == "qa-pair" and report.claims[0].text == "Question: Capital of France?\nAnswer: Paris"
    )
    assert evidence_of(client.calls[0].request) == "[1] Paris is the capital."


async def test_summarization_extracts_then_debates_each_claim_on_its_top_sentences() -> None:
    claims = ["The ICC accepted Palestine as its 123rd member.", "Israel and the United States supported the move."]
    client = router(
        {"extract": json.dumps({"claims": claims}), "initial": lambda r: op((r.site or "").startswith("c0:"))}
    )
    async with verifier(client, retrieval=RetrievalConfig(retriever="bm25", top_k=3)) as v:
        report = await v.verify(
            TaskInput(RECORD["hallucinated_summary"], reference=RECORD["document"]), task="summarization"
        )
    assert [kind_of(c.request) for c in client.calls] == ["extract", "initial", "initial"]
    assert RECORD["hallucinated_summary"].strip() in client.calls[0].request.messages[-1].content
    assert [c.text for c in report.claims] == claims
    first, second = report.claims
    assert len(first.evidence) == 3 and any("123rd" in e.text for e in first.evidence)
    assert all(e.kind == "document" and e.source and "#sentence-" in e.source for e in first.evidence)
    assert "123rd" in evidence_of(client.calls[1].request)
    assert any("Israel and the United States" in e.text for e in second.evidence)
    assert (report.verdict, report.factual) == ("non_factual", False)
    assert report.extraction.method == "llm-sentences" and "factool_claims" in report.extraction.prompts
    assert report.usage.llm_calls == 3
    assert report.ratios.factual == 0.5 and report.score == pytest.approx((1.0 + 0.4) / 2)


async def test_summarization_needs_the_document() -> None:
    async with verifier(router({})) as v:
        with pytest.raises(ValueError, match="summarization needs the source document"):
            await v.verify("A summary.", task="summarization")


async def test_dialogue_filters_then_extracts_with_history_and_knowledge_as_evidence() -> None:
    history = "[Human]: Do you like Iron Man? [Assistant]: Sure do! [Human]: Did RDJ star in Zodiac?"
    client = router(
        {
            "filter": "RDJ starred in Zodiac with Tom Hanks.",
            "extract": json.dumps({"claims": ["Robert Downey Jr. starred in Zodiac.", "Tom Hanks starred in Zodiac."]}),
            "initial": op(True),
        }
    )
    async with verifier(client) as v:
        report = await v.verify(
            TaskInput(
                "I'm not a fan of crime movies, but I know RDJ starred in Zodiac with Tom Hanks.",
                question=history,
                reference="Robert Downey Jr. starred in Zodiac.",
            ),
            task="dialogue",
        )
    assert [kind_of(c.request) for c in client.calls] == ["filter", "extract", "initial", "initial"]
    assert "I'm not a fan of crime movies" in client.calls[0].request.messages[-1].content
    assert "Text: RDJ starred in Zodiac with Tom Hanks.\n" in client.calls[1].request.messages[-1].content
    assert history in client.calls[1].request.messages[-1].content  # context for coreference
    evidence = evidence_of(client.calls[2].request)
    assert evidence == f"[1] Robert Downey Jr. starred in Zodiac.\n[2] {history}"
    assert [e.kind for e in report.claims[0].evidence] == ["given", "dialogue_history"]
    assert report.extraction.filtered_response == "RDJ starred in Zodiac with Tom Hanks."
    assert set(report.extraction.prompts) == {"subjective_filter", "factool_claims"}


async def test_dialogue_with_nothing_factual_has_no_claims_not_a_verdict() -> None:
    client = router({"filter": "None"})
    async with verifier(client) as v:
        report = await v.verify(
            TaskInput("Sure do! I love it, don't you?", question="[Human]: Do you like Iron Man?"), task="dialogue"
        )
    assert [kind_of(c.request) for c in client.calls] == ["filter"]
    assert (report.verdict, report.factual, report.claims, report.score) == ("no_claims", None, [], None)
    assert report.note is not None and "nothing factual" in report.note
    assert report.usage.llm_calls == 1


async def test_kbqa_without_reference_or_search_is_knowledge_free_and_says_so() -> None:
    client = router({"extract": json.dumps({"claims": ["The US has 94 operating reactors."]}), "initial": op(False, 3)})
    async with verifier(client) as v:
        report = await v.verify(
            TaskInput("The United States has 94 operating reactors.", question="Nuclear plants?"), task="kbqa"
        )
    assert [kind_of(c.request) for c in client.calls] == ["extract", "initial"]
    assert evidence_of(client.calls[1].request).startswith("(no evidence was given")
    assert report.note is not None and "own knowledge" in report.note
    assert report.claims[0].evidence == []


async def test_general_with_local_search_generates_queries_and_uses_results(tmp_path: Path) -> None:
    collection = tmp_path / "docs.jsonl"
    nuclear = "The United States has 94 operating nuclear reactors. They produce about 19% of its electricity."
    docs = [
        {"title": "Nuclear power in the United States", "text": nuclear},
        {"title": "Cats", "text": "Cats sleep a lot."},
    ]
    collection.write_text("".join(json.dumps(d) + "\n" for d in docs))
    client = router(
        {
            "extract": json.dumps({"claims": ["The US has 94 operating reactors."]}),
            "queries": json.dumps(
                {"queries": ["US number of operating nuclear reactors", "94 reactors United States"]}
            ),
            "initial": op(True),
        }
    )
    search = SearchConfig(backend="local", collection=str(collection), results_per_query=2)
    async with verifier(client, search=search) as v:
        report = await v.verify("The US has 94 operating reactors.", task="general")
    assert [kind_of(c.request) for c in client.calls] == ["extract", "queries", "initial"]
    evidence = report.claims[0].evidence
    assert evidence[0].text == "The United States has 94 operating nuclear reactors."
    assert evidence[0].kind == "search" and evidence[0].query == "US number of operating nuclear reactors"
    assert evidence[0].source == f"{collection}#line-1"
    assert all("Cats" not in e.text for e in evidence)
    assert report.claims[0].usage.llm_calls == 2  # the query call counts toward the claim


async def test_triplet_format_renders_sentences_for_the_debate() -> None:
    client = router({"extract": json.dumps({"triplets": [["Palestine", "joined", "the ICC"]]}), "initial": op(True)})
    async with verifier(client, claims=ClaimConfig(format="triplet"), retrieval=RetrievalConfig(retriever="bm25")) as v:
        report = await v.verify(
            TaskInput("Palestine joined the ICC.", reference=RECORD["document"]), task="summarization"
        )
    claim = report.claims[0]
    assert claim.text == "Palestine joined the ICC."
    assert "Claim:\nPalestine joined the ICC." in client.calls[1].request.messages[-1].content
    assert report.extraction.method == "llm-triplets"


async def test_extraction_is_reasked_then_fails_as_a_typed_failure_not_a_verdict() -> None:
    client = ScriptedChatClient(["no json here", '{"claims": "one"}', '{"claims": [1, 2]}'])
    config = VerifierConfig(claims=ClaimConfig(max_parse_retries=2), retrieval=RetrievalConfig(retriever="bm25"))
    async with Verifier(config=config, client=client) as v:
        report = await v.verify(TaskInput("A summary.", reference=RECORD["document"]), task="summarization")
    # A typed failure on the response, never a verdict: no claim was judged.
    assert report.failure is not None and report.failure.kind == "extraction_failed"
    assert "after 3 attempts" in report.failure.message and report.failure.transient is False
    assert (report.verdict, report.factual, report.claims) == ("unverifiable", None, [])
    reask = client.calls[1].request.messages
    assert [m.role for m in reask] == ["system", "user", "assistant", "user"]
    assert 'Reply again with only a JSON object {"claims"' in reask[-1].content


async def test_claims_of_one_response_run_concurrently_and_keep_order() -> None:
    claims = [f"Claim number {i} about the ICC." for i in range(6)]

    def initial(request: ChatRequest) -> str:
        # By the call's site (claim c3), never by the prompt's wording.
        return op(not (request.site or "").startswith("c3:"))

    client = router({"extract": json.dumps({"claims": claims}), "initial": initial})
    client._delay_s = 0.05
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        claim_concurrency=3,
        retrieval=RetrievalConfig(retriever="bm25"),
    )
    async with Verifier(config=config, client=client) as v:
        report = await v.verify(TaskInput(" ".join(claims), reference=RECORD["document"]), task="summarization")
    assert [c.text for c in report.claims] == claims
    assert [c.claim_id for c in report.claims] == [f"c{i}" for i in range(6)]
    assert [c.factual for c in report.claims] == [True, True, True, False, True, True]
    assert client.max_in_flight == 3  # bounded by config.claim_concurrency


def test_blank_passages_are_left_out_of_the_evidence() -> None:
    from debate.tasks._common import as_evidence
    from debate.types import Source

    assert [e.text for e in as_evidence({"1": " ", "2": "Paris."}, None)] == ["Paris."]
    assert [e.source for e in as_evidence([Source(id="a"), Source(id="b", text="Lyon.")], None)] == ["b"]
    assert as_evidence({"1": ""}, None) == []
