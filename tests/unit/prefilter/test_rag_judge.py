"""Seed 000's judge (`../shared/seeds/000-rag-citation-rules-and-judge.md`): its output format, its decision flow
(the judge unless the rules' score is above 0.6; only on moderate risk as a named variant), the combined criteria,
the risk table's actions, the two-step mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import PrefilterConfig
from debate.errors import ReplyUnusableError
from debate.plugins import TaskInput
from debate.prefilter import citation_check, combine_risk, parse_judgment
from debate.prefilter._judge import judge_risk, unsupported_claims
from debate.results import ErrorInfo, ErrorRecord, Record, ResultRecord, rag_monitoring
from debate.testing import ScriptedChatClient
from tests.support.helpers import debate, op

SOURCES = {"1": "Paris is the capital and largest city of France.", "2": "The Seine flows through Paris."}
LOW = "Paris is the capital of France [1]. The Seine flows through Paris [2]."
UNCITED = "The city also hosts a great many museums and galleries of fine art"  # 66 characters, no citation
MODERATE = f"{LOW} {UNCITED}."
HIGH = "Paris is the capital of France [7]. The Seine flows through Paris [2]."


def rubric(**changes: object) -> str:
    """A reply in the seed's "LLM 評估輸出格式" shape (its own example values)."""
    base = {
        "score": 0.85,
        "reasoning": "...",
        "confidence": 0.9,
        "decision": "synthesize",
        "hallucination_risk": 0.1,
        "hallucination_notes": "None",
    }
    return json.dumps(base | changes)


def verifier(client: ScriptedChatClient, **options: object) -> Verifier:
    prefilter = PrefilterConfig(prefilters=["rag-judge"], options={"rag-judge": options} if options else {})
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=prefilter)
    return Verifier(config=config, client=client)


def test_the_fixture_answers_have_the_rule_levels_they_are_named_for() -> None:
    levels = [citation_check(a, list(SOURCES)).risk_level for a in (LOW, MODERATE, HIGH)]
    assert levels == ["low", "moderate", "high"]


UNCITED_ONLY = "Paris is the capital of France. The Seine flows through Paris."  # no citation: score 1.0


async def test_a_rules_score_above_the_high_threshold_is_high_at_once_without_the_judge() -> None:
    """Seed 000 "判定流程": "如果風險分數 > 0.6 → 直接判定為高風險". The scripted client has no rag-judge reply: a
    call would fail the test."""
    client = ScriptedChatClient({"debate": [op(True)] * 2})
    async with verifier(client) as v:
        report = await v.verify(TaskInput(UNCITED_ONLY, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    judgment = report.prefilter.judge
    assert judgment.rubric is None and judgment.judge_risk is None
    assert (judgment.combined_risk, judgment.action, report.prefilter.prefilter_calls) == ("high", "reject", 0)
    assert "rag-judge" not in client.purposes()


@pytest.mark.parametrize(("answer", "rules", "combined"), [(LOW, "low", "moderate"), (HIGH, "high", "high")])
async def test_the_decision_flow_judges_every_answer_whose_score_is_not_above_the_threshold(
    answer: str, rules: str, combined: str
) -> None:
    """Seed 000 "判定流程" then "綜合判定": the judge runs and both are combined, a low rules risk included (the
    low-risk criteria need the judge's hallucination_risk <= 0.3); HIGH's score is 0.5 (an invalid id)."""
    client = ScriptedChatClient({"rag-judge": [rubric(hallucination_risk=0.45)], "debate": [op(True)] * 2})
    async with verifier(client) as v:
        report = await v.verify(TaskInput(answer, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    judgment = report.prefilter.judge
    assert (judgment.rules_risk, judgment.combined_risk, report.prefilter.prefilter_calls) == (rules, combined, 1)


@pytest.mark.parametrize(("answer", "risk", "action"), [(LOW, "low", "accept"), (HIGH, "high", "reject")])
async def test_judge_on_moderate_is_the_named_variant(answer: str, risk: str, action: str) -> None:
    """Seed 000 "多層檢測策略": the LLM evaluation only when the rules find moderate risk."""
    client = ScriptedChatClient({"debate": [op(True)] * 2})
    async with verifier(client, when="moderate") as v:
        report = await v.verify(TaskInput(answer, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    judgment = report.prefilter.judge
    assert judgment.rubric is None and judgment.judge_risk is None
    assert (judgment.combined_risk, judgment.action, report.prefilter.prefilter_calls) == (risk, action, 0)
    assert "rag-judge" not in client.purposes()


@pytest.mark.parametrize(
    ("judge", "risk", "reason"),
    [
        ({"hallucination_risk": 0.3}, "moderate", "rules: 1 uncited long sentence(s)"),
        ({"hallucination_risk": 0.61}, "high", "judge: hallucination_risk 0.61 > 0.6"),
        (
            {"hallucination_notes": 'Unsupported claim: "The city hosts many museums"'},
            "high",
            "judge: 1 unsupported claim(s) named",
        ),
    ],
)
def test_combined_criteria_on_a_moderate_answer(judge: dict[str, object], risk: str, reason: str) -> None:
    """Seed 000 "判定標準": LLM hallucination_risk > 0.6, or notes that name an unsupported claim, make it high."""
    level, reasons = combine_risk(citation_check(MODERATE, list(SOURCES)), parse_judgment(rubric(**judge)))
    assert level == risk and reason in reasons


@pytest.mark.parametrize(
    ("risk", "level"), [(0.0, "low"), (0.3, "low"), (0.31, "moderate"), (0.6, "moderate"), (0.61, "high")]
)
def test_the_seed_risk_table(risk: float, level: str) -> None:
    """Seed 000 "風險分級": 0.0-0.3 low, 0.3-0.6 moderate, 0.6-1.0 high."""
    assert judge_risk(parse_judgment(rubric(hallucination_risk=risk))) == level
    assert combine_risk(citation_check(LOW, list(SOURCES)), parse_judgment(rubric(hallucination_risk=risk)))[0] == level


def test_notes_name_unsupported_claims_only_on_their_own_lines() -> None:
    notes = 'Checked every claim.\nUnsupported claim: "Lyon is the capital"\n- unsupported claim: the Seine is dry'
    assert unsupported_claims(notes) == ["Lyon is the capital", "the Seine is dry"]
    assert unsupported_claims("None") == [] and unsupported_claims("Unsupported claim: None") == []
    assert unsupported_claims("There is no unsupported claim in this answer.") == []


async def test_judge_always_and_configurations_written_with_judge_always_still_load() -> None:
    client = ScriptedChatClient({"rag-judge": [rubric(hallucination_risk=0.45)], "debate": [op(True)] * 2})
    saved = PrefilterConfig.model_validate({"prefilters": ["rag-judge"], "judge_always": True})
    assert saved.options == {"rag-judge": {"when": "always"}}
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=saved)
    async with Verifier(config=config, client=client) as v:
        report = await v.verify(TaskInput(UNCITED_ONLY, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    assert (report.prefilter.judge.rules_risk, report.prefilter.judge.combined_risk) == ("high", "high")
    assert report.prefilter.prefilter_calls == 1


async def test_two_step_self_critique_then_a_smaller_model_converts() -> None:
    """Seed 000 "兩階段提示方法": free form with self-criticism and several interpretations, then a smaller model
    converts to the standard JSON."""
    client = ScriptedChatClient(
        {
            "rag-judge:freeform": ["The museum sentence has no source; risk about 0.7; I am fairly sure."],
            "rag-judge:convert": [
                "not json",
                rubric(score=0.4, decision="refine_search", confidence=0.6, hallucination_risk=0.7),
            ],
            "debate": [op(True)] * 3,
        }
    )
    async with verifier(client, two_step=True, convert_model="small-model") as v:
        report = await v.verify(TaskInput(MODERATE, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.judge is not None
    judgment = report.prefilter.judge
    assert judgment.two_step and judgment.convert_model == "small-model" and judgment.combined_risk == "high"
    freeform, convert = client.calls[0].request, client.calls[1].request
    assert "more than one reading" in freeform.messages[-1].content and "criticise" in freeform.messages[-1].content
    assert freeform.model is None and convert.model == "small-model" and client.calls[2].request.model == "small-model"
    assert "risk about 0.7" in convert.messages[-1].content
    assert client.purposes()[:3] == ["rag-judge:freeform", "rag-judge:convert", "rag-judge:convert"]  # one re-ask
    assert set(report.meta.prompts) >= {"rag_judge_freeform", "rag_judge_convert"}


async def test_an_unusable_judge_fails_the_response_not_silently() -> None:
    client = ScriptedChatClient({"rag-judge": ["nope"] * 3})
    async with verifier(client) as v:
        report = await v.verify(TaskInput(MODERATE, reference=SOURCES), task="rag")
    assert report.verdict == "unverifiable" and report.failure is not None
    assert (report.failure.kind, report.failure.stage) == ("reply_unusable", "prefilter:rag-judge")
    assert report.claims == []


def test_parsing_takes_the_seed_shape_only() -> None:
    assert parse_judgment(rubric(decision="Refine Search")).decision == "refine_search"
    with pytest.raises(ReplyUnusableError, match="score"):
        parse_judgment(rubric(score=5))  # a 1-5 scale is not the seed's 0.0-1.0
    with pytest.raises(ReplyUnusableError, match="decision"):
        parse_judgment(rubric(decision="pass"))
    with pytest.raises(ReplyUnusableError, match="hallucination_risk"):
        parse_judgment(rubric(hallucination_risk="high"))
    with pytest.raises(ReplyUnusableError, match="hallucination_notes"):
        parse_judgment(rubric(hallucination_notes=["a list"]))


async def test_the_response_risk_is_the_highest_of_its_checks() -> None:
    client = ScriptedChatClient({"rag-judge": [rubric(hallucination_risk=0.9)], "debate": [op(True)] * 3})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=PrefilterConfig(prefilters=["rag-judge", "rules"])
    )
    async with Verifier(config=config, client=client) as v:
        report = await v.verify(TaskInput(MODERATE, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.risk_level == "high"
    assert [c.name for c in report.prefilter.checks] == ["rag-judge", "rules"]


@pytest.mark.slow
async def test_monitoring_figures_over_a_results_log(tmp_path: Path) -> None:
    """Seed 000 "日誌和監控": average risk score, high-risk share, invalid-citation and uncited-claim frequency, in
    `debate report` for a results log of RAG answers."""
    client = ScriptedChatClient({"rag-judge": [rubric(hallucination_risk=0.2)] * 3, "debate": [op(True)] * 7})
    records: list[Record] = []
    async with verifier(client) as v:
        for answer in (LOW, MODERATE, HIGH):
            report = await v.verify(TaskInput(answer, reference=SOURCES), task="rag")
            records.append(ResultRecord(id=answer[:5], line=len(records) + 1, result=report))
    records.append(ErrorRecord(id="bad", line=4, error=ErrorInfo(kind="input", message="no response")))
    figures = rag_monitoring(records)
    assert (figures.answers, figures.skipped, figures.judged) == (3, 1, 3)  # no rules score above 0.6: all judged
    scores = [citation_check(a, list(SOURCES)).hallucination_risk_score for a in (LOW, MODERATE, HIGH)]
    assert figures.average_risk_score == pytest.approx(sum(scores) / 3)
    assert figures.high_risk_share == pytest.approx(1 / 3)  # HIGH: an invalid id
    assert figures.invalid_citation_frequency == pytest.approx(1 / 3) and figures.uncited_frequency == pytest.approx(
        1 / 3
    )
    assert figures.average_judge_risk == pytest.approx(0.2)
    log = tmp_path / "rag.jsonl"
    log.write_text("".join(r.to_json() + "\n" for r in records))
    shown = debate("report", str(log))
    assert shown.returncode == 0, shown.stderr
    assert "RAG monitoring" in shown.stdout and "| 3 | " in shown.stdout
    as_json = json.loads(debate("report", str(log), "--format", "json").stdout)
    [figures] = as_json["rag_monitoring"]
    assert figures["high_risk_share"] == pytest.approx(1 / 3) and figures["log"] == str(log)
    summary = as_json["results_logs"][0]
    assert (summary["records"], summary["input_errors"], summary["tasks"]) == (4, 1, "rag 3")
    assert figures["skipped"] == 1 and "| 1 |" in shown.stdout.split("RAG monitoring (", 1)[1]  # the record left out
    log.write_text("{not json\n")
    broken = debate("report", str(log))
    assert broken.returncode == 2 and "line 1: not valid JSON" in broken.stderr


def test_a_judgment_stored_by_an_earlier_version_still_loads() -> None:
    """Desk audits and results logs written before the seed's judge keep loading; the old reply is kept apart."""
    from debate.types import RagJudgment

    old = {
        "score": 4,
        "reasoning": "ok",
        "confidence": 0.8,
        "decision": "pass",
        "hallucination_risk": "low",
        "hallucination_notes": [],
        "two_step": False,
        "rules_risk": "low",
        "combined_risk": "low",
        "combined_reasons": ["no rule or judge condition for a higher risk"],
    }
    loaded = RagJudgment.model_validate(old)
    assert loaded.rubric is None and loaded.earlier_rubric is not None and loaded.earlier_rubric["score"] == 4
    assert loaded.combined_risk == "low"
