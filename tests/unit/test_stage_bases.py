"""The base classes a plugin builds on: a prefilter declares its options once (its type argument), a task overrides
only what it does differently; both are registered as their own factories."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, ConfigDict

from debate import PrefilterConfig, ScriptedChatClient, TaskInput, UsageError, Verifier, VerifierConfig
from debate.claims import Extraction
from debate.config import RetrievalConfig
from debate.plugins import PREFILTERS, TASKS, Plan, StageContext, check_config, stage_options
from debate.prefilter import BasePrefilter, NoOptions
from debate.tasks import BaseTask
from debate.types import Claim, Evidence, ExtractionInfo, PrefilterDecision


class LengthOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    longest: int = 40


class LengthPrefilter(BasePrefilter[LengthOptions]):
    """a claim longer than `longest` characters is not decided here"""

    name = "test-length"

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        if len(claim.text) > self.options.longest:
            return PrefilterDecision(name=self.name, decision="pass", reason="too long to judge by rule")
        return PrefilterDecision(name=self.name, decision="factual", reason="short enough")


class Bare(BasePrefilter[NoOptions]):
    name = "test-bare"

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        return PrefilterDecision(name=self.name, decision="pass", reason="never decides")


class FirstWordTask(BaseTask):
    name = "test-first-word"

    async def claims(self, item: TaskInput, ctx: StageContext) -> Extraction:
        word = item.response.split()[0]
        return Extraction([Claim(id="c0", text=f"{word} is a word.", kind="atomic")], ExtractionInfo(method="word"))


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered for this file's tests only: the registries are the process's, and a name left behind would reach
    every later test (the desk's published schema lists the registered tasks)."""
    for registry, name, factory in (
        (PREFILTERS, LengthPrefilter.name, LengthPrefilter),
        (PREFILTERS, Bare.name, Bare),
        (TASKS, FirstWordTask.name, FirstWordTask),
    ):
        monkeypatch.setitem(registry._entries, name, factory)


def test_a_prefilter_declares_its_options_once() -> None:
    assert stage_options(PREFILTERS, "test-length") is LengthOptions and stage_options(PREFILTERS, "test-bare") is None
    with pytest.raises(UsageError, match="takes no options"):
        check_config(
            VerifierConfig(prefilter=PrefilterConfig(prefilters=["test-bare"], options={"test-bare": {"x": 1}}))
        )
    with pytest.raises(UsageError, match="longest"):
        check_config(
            VerifierConfig(
                prefilter=PrefilterConfig(prefilters=["test-length"], options={"test-length": {"longest": "x"}})
            )
        )
    with pytest.raises(TypeError, match="abstract"):

        class NoCheck(BasePrefilter[NoOptions]):
            name = "no-check"

        NoCheck(None)  # type: ignore[abstract, arg-type]


async def test_the_bases_defaults_carry_a_verify() -> None:
    opinion = json.dumps({"opinion": "agreed", "factuality": True, "Error severity": 0})
    config = VerifierConfig(
        prefilter=PrefilterConfig(prefilters=["test-length", "test-bare"], options={"test-length": {"longest": 15}}),
        retrieval=RetrievalConfig(retriever="bm25"),
    )
    async with Verifier(config=config, client=ScriptedChatClient({"debate": [opinion] * 20})) as verifier:
        short = await verifier.verify(TaskInput("Oui merci", reference="Oui is French."), task="test-first-word")
        long = await verifier.verify(TaskInput("Wonderfully done", reference="It was done."), task="test-first-word")
    assert short.claims[0].decided_by == "prefilter:test-length" and short.extraction.method == "word"
    assert long.claims[0].decided_by == "debate" and [p.name for p in long.claims[0].prefilters] == [
        "test-length",
        "test-bare",
    ]
    # BaseTask's evidence: the reference's sentences (no search backend, so a document it is)
    assert long.claims[0].evidence and long.claims[0].evidence[0].text == "It was done."
