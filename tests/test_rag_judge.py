"""The rag-judge prefilter: its rubric, the two-step mode, the combined rules+judge decision and its cascade role."""

from __future__ import annotations

import json

import pytest
from conftest import op

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import PrefilterConfig
from debate.errors import ReplyUnusableError
from debate.prefilter import combine_risk, parse_judgment
from debate.prefilter.citations import citation_check
from debate.testing import ScriptedChatClient

SOURCES = {"1": "Paris is the capital and largest city of France.", "2": "The Seine flows through Paris."}
ANSWER = "Paris is the capital of France [1]. The Seine flows through Paris [2]."


def rubric(**changes: object) -> str:
    base = {"score": 5, "reasoning": "all supported", "confidence": 0.9, "decision": "pass",
            "hallucination_risk": "low", "hallucination_notes": []}  # fmt: skip
    return json.dumps(base | changes)


def verifier(client: ScriptedChatClient, *, two_step: bool = False, prefilters: list[str] | None = None) -> Verifier:
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(prefilters=prefilters or ["rag-judge"], judge_two_step=two_step),
    )
    return Verifier(config=config, client=client)


async def test_one_step_judge_reports_its_rubric_and_the_combined_risk() -> None:
    client = ScriptedChatClient({"rag-judge": [rubric()], "debate": [op(True)] * 2})
    async with verifier(client) as v:
        report = await v.verify(ANSWER, question="What about Paris?", reference=SOURCES, task="rag")
    assert report.prefilter is not None
    judge = report.prefilter.judge
    assert judge is not None and (judge.score, judge.decision, judge.two_step) == (5, "pass", False)
    # Two distinct valid ids for two claims: the rules say low; the judge passes: combined low.
    assert (judge.rules_risk, judge.combined_risk, report.prefilter.risk_level) == ("low", "low", "low")
    request = client.calls[0].request
    assert request.purpose == "rag-judge" and request.response_schema is not None
    user = request.messages[-1].content
    assert "[1] Paris is the capital" in user and "What about Paris?" in user
    assert "rag_judge" in report.meta.prompts and report.prefilter.prefilter_calls == 1
    assert [c.decided_by for c in report.claims] == ["debate", "debate"]  # the judge never decides a claim


async def test_two_step_converts_a_free_form_judgment() -> None:
    client = ScriptedChatClient(
        {
            "rag-judge:freeform": ["The second statement is not in the sources; I am fairly sure it fails."],
            "rag-judge:convert": ["not json", rubric(score=3, decision="fail", confidence=0.6,
                                                     hallucination_risk="moderate", hallucination_notes=["x"])],
            "debate": [op(True)] * 2,
        }
    )  # fmt: skip
    async with verifier(client, two_step=True) as v:
        report = await v.verify(ANSWER, reference=SOURCES, task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    judge = report.prefilter.judge
    assert judge.two_step and judge.combined_risk == "moderate" and judge.hallucination_notes == ["x"]
    convert = client.calls[1].request
    assert "not in the sources; I am fairly sure" in convert.messages[-1].content
    assert client.purposes()[:3] == ["rag-judge:freeform", "rag-judge:convert", "rag-judge:convert"]  # one re-ask
    assert set(report.meta.prompts) >= {"rag_judge_freeform", "rag_judge_convert"}


async def test_an_unusable_judge_fails_the_response_not_silently() -> None:
    client = ScriptedChatClient({"rag-judge": ["nope"] * 3})
    async with verifier(client) as v:
        report = await v.verify(ANSWER, reference=SOURCES, task="rag")
    assert report.verdict == "unverifiable" and report.failure is not None
    assert (report.failure.kind, report.failure.stage) == ("reply_unusable", "prefilter:rag-judge")
    assert report.claims == []


@pytest.mark.parametrize(
    ("answer", "judge", "risk", "reason"),
    [
        (ANSWER, {}, "low", "no rule or judge condition"),
        ("Paris is the capital of France [7]. The Seine flows through Paris [2].", {}, "high", "citation rules: high"),
        (ANSWER, {"hallucination_risk": "high"}, "high", "judge: high hallucination risk"),
        (ANSWER, {"decision": "fail", "confidence": 0.8}, "high", "judge: fail with confidence 0.80"),
        (ANSWER, {"decision": "fail", "confidence": 0.5}, "moderate", "judge: fail with confidence 0.50"),
        (ANSWER, {"score": 2}, "high", "judge: score 2/5"),
        (ANSWER, {"score": 3}, "moderate", "judge: score 3/5"),
    ],
)
def test_combined_decision_rules(answer: str, judge: dict[str, object], risk: str, reason: str) -> None:
    level, reasons = combine_risk(citation_check(answer, list(SOURCES)), parse_judgment(rubric(**judge)))
    assert level == risk and any(r.startswith(reason) for r in reasons)


def test_rubric_parsing_rejects_what_it_cannot_use() -> None:
    assert parse_judgment(rubric(decision="FAIL")).decision == "fail"
    with pytest.raises(ReplyUnusableError, match="score"):
        parse_judgment(rubric(score=9))
    with pytest.raises(ReplyUnusableError, match="hallucination_notes"):
        parse_judgment(json.dumps({k: v for k, v in json.loads(rubric()).items() if k != "hallucination_notes"}))


async def test_the_response_risk_is_the_highest_of_its_checks() -> None:
    """The judge fails the answer while the rules see low risk: the response risk is high."""
    client = ScriptedChatClient(
        {"rag-judge": [rubric(decision="fail", confidence=0.95, hallucination_risk="high")], "debate": [op(True)] * 2}
    )
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(prefilters=["rag-judge", "rules"]),
    )
    async with Verifier(config=config, client=client) as v:
        report = await v.verify(ANSWER, reference=SOURCES, task="rag")
    assert report.prefilter is not None and report.prefilter.risk_level == "high"
    assert [c.name for c in report.prefilter.checks] == ["rag-judge", "rules"]
