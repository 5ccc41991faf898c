"""Each task's `plan` called directly (debate.tasks.*): the claims it makes, the evidence each claim gets and the
input it refuses, with the model calls scripted by purpose."""

from __future__ import annotations

import json

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.errors import InputError
from debate.plugins import TASKS, TaskInput
from debate.testing import ScriptedChatClient
from debate.types import Claim

PARIS = "Paris is the capital of France."


def _verifier(client: ScriptedChatClient) -> Verifier:
    return Verifier(config=VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0)), client=client)


async def test_qa_makes_one_claim_of_the_pair_and_gives_it_the_knowledge() -> None:
    client = ScriptedChatClient({})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("qa")().plan(
            TaskInput("Paris", question="Capital of France?", reference=PARIS, reference_source="k.txt"),
            verifier.runtime,
        )
        evidence, usage = await plan.evidence.evidence(plan.claims[0])
    assert [(c.id, c.kind) for c in plan.claims] == [("c0", "qa_pair")] and plan.extraction.method == "qa-pair"
    assert "Capital of France?" in plan.claims[0].text and "Paris" in plan.claims[0].text
    assert [(e.text, e.source, e.kind) for e in evidence] == [(PARIS, "k.txt", "given")] and usage.llm_calls == 0
    assert client.calls == []


async def test_given_claims_replace_extraction_in_every_task() -> None:
    client = ScriptedChatClient({})
    async with _verifier(client) as verifier:
        for task in ("qa", "summarization", "dialogue", "general"):
            plan = await TASKS.get(task)().plan(
                TaskInput("Paris is big. Lyon is old.", reference=PARIS, claims=["Paris is big."]), verifier.runtime
            )
            assert [c.text for c in plan.claims] == ["Paris is big."] and plan.extraction.method == "given", task
    assert client.calls == []


async def test_summarization_extracts_claims_and_ranks_the_documents_sentences() -> None:
    document = " ".join(f"Sentence {i} is about topic {i}." for i in range(15)) + " Paris is the capital of France."
    client = ScriptedChatClient({"extract": [json.dumps({"claims": ["Paris is the capital of France."]})]})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("summarization")().plan(
            TaskInput("Paris is the capital of France.", reference=document), verifier.runtime
        )
        evidence, _ = await plan.evidence.evidence(plan.claims[0])
    assert [c.text for c in plan.claims] == [PARIS] and plan.extraction.attempts == 1
    assert len(evidence) == 10 and PARIS in [e.text for e in evidence]  # the paper's top-10 sentences
    assert all(e.kind == "document" and e.source and "#sentence-" in e.source for e in evidence)
    assert client.purposes() == ["extract"]
    with pytest.raises(InputError, match="needs the source document as `reference`"):
        await TASKS.get("summarization")().plan(TaskInput("x"), verifier.runtime)


async def test_dialogue_filters_subjective_content_before_extraction() -> None:
    client = ScriptedChatClient({"subjective_filter": ["None"]})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("dialogue")().plan(
            TaskInput("I love it, it is wonderful!", question="A: Have you been to Paris?", reference=PARIS),
            verifier.runtime,
        )
        evidence, _ = await plan.evidence.evidence(Claim(id="c0", text="x", kind="atomic"))
    assert plan.claims == [] and plan.notes == ["nothing factual is left after removing subjective content"]
    assert [e.kind for e in evidence] == ["given", "dialogue_history"] and client.purposes() == ["subjective_filter"]

    client = ScriptedChatClient({"subjective_filter": [PARIS], "extract": [json.dumps({"claims": [PARIS]})]})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("dialogue")().plan(TaskInput("I think " + PARIS, question="A: Hi."), verifier.runtime)
    assert [c.text for c in plan.claims] == [PARIS] and plan.extraction.filtered_response == PARIS
    assert plan.extraction.method.startswith("subjective-filter+") and plan.extraction.attempts == 2


async def test_rag_splits_cited_sentences_and_gives_each_its_cited_sources() -> None:
    sources = {"1": PARIS, "2": "The Seine flows through Paris."}
    client = ScriptedChatClient({})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("rag")().plan(
            TaskInput("Paris is the capital of France [1]. It is on the Seine [2].", reference=sources),
            verifier.runtime,
        )
        first, _ = await plan.evidence.evidence(plan.claims[0])
        second, _ = await plan.evidence.evidence(plan.claims[1])
        with pytest.raises(InputError, match="task rag needs the sources"):
            await TASKS.get("rag")().plan(TaskInput("x [1]."), verifier.runtime)
    assert [c.citations for c in plan.claims] == [["1"], ["2"]] and plan.sources is not None
    assert [e.source for e in first] == ["1"] and [e.source for e in second] == ["2"] and client.calls == []


async def test_general_without_reference_or_search_says_it_has_no_evidence() -> None:
    client = ScriptedChatClient({"extract": [json.dumps({"claims": [PARIS]})]})
    async with _verifier(client) as verifier:
        plan = await TASKS.get("general")().plan(TaskInput(PARIS), verifier.runtime)
        evidence, _ = await plan.evidence.evidence(plan.claims[0])
    assert [c.text for c in plan.claims] == [PARIS] and evidence == []
    assert plan.notes == ["no reference and no search backend: claims were judged from the model's own knowledge"]
