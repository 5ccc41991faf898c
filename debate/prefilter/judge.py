"""The `rag-judge` prefilter: an LLM judge of a whole RAG answer against its sources, combined with the citation
rules into one response risk.

Combined decision (our reading of the rule set: "high risk if any of ..."), with the judge's rubric and the
citation rules' report for the same answer:
- high if any of: the rules' risk is high; the judge's hallucination_risk is high; the judge fails the answer with
  confidence >= 0.7; the judge's score is 2 or less;
- moderate if any of: the rules' risk is moderate; the judge's risk is moderate; the judge fails the answer with
  lower confidence; the score is 3;
- low otherwise.
A high combined risk feeds the cascade: no prefilter may then decide a claim of the answer factual (each goes to the
debate). The judge never decides a claim by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.errors import ReplyUnusableError
from debate.llm import ChatMessage, ChatRequest
from debate.parsing import load_json_object
from debate.prefilter.citations import citation_check
from debate.prompts import load_prompt
from debate.stages import PREFILTERS, Plan, StageContext
from debate.structured import ask_structured, converse
from debate.types import (
    CitationReport,
    Claim,
    ClaimVerdict,
    Evidence,
    PrefilterDecision,
    RagJudgment,
    ResponseCheck,
    RiskLevel,
    Usage,
)

__all__ = ["JUDGE_SCHEMA", "RagJudgePrefilter", "combine_risk", "parse_judgment"]

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reasoning": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "decision": {"type": "string", "enum": ["pass", "fail"]},
        "hallucination_risk": {"type": "string", "enum": ["low", "moderate", "high"]},
        "hallucination_notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["score", "reasoning", "confidence", "decision", "hallucination_risk", "hallucination_notes"],
    "additionalProperties": False,
}
_EXPECTED = (
    'a JSON object {"score": 1-5, "reasoning": "...", "confidence": 0-1, "decision": "pass" or "fail", '
    '"hallucination_risk": "low", "moderate" or "high", "hallucination_notes": ["..."]}'
)
_CONFIDENT_FAIL = 0.7


class _Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=1, le=5)
    reasoning: str
    confidence: float = Field(ge=0, le=1)
    decision: Literal["pass", "fail"]
    hallucination_risk: Literal["low", "moderate", "high"]
    hallucination_notes: list[str]


def parse_judgment(text: str) -> _Rubric:
    """The judge's JSON rubric; anything else is an unusable reply (re-asked)."""
    raw = load_json_object(text)
    if isinstance(raw.get("decision"), str):
        raw["decision"] = raw["decision"].strip().lower()
    if isinstance(raw.get("hallucination_risk"), str):
        raw["hallucination_risk"] = raw["hallucination_risk"].strip().lower()
    try:
        return _Rubric.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise ReplyUnusableError(f"{where}: {first['msg']}") from exc


def combine_risk(rules: CitationReport | None, rubric: _Rubric) -> tuple[RiskLevel, list[str]]:
    """The combined decision of the module docstring, with the conditions that hold."""
    rules_risk = rules.risk_level if rules is not None else "none"
    failed = rubric.decision == "fail"
    high = [
        *(["citation rules: high risk"] if rules_risk == "high" else []),
        *(["judge: high hallucination risk"] if rubric.hallucination_risk == "high" else []),
        *([f"judge: fail with confidence {rubric.confidence:.2f}"] if failed and rubric.confidence >= _CONFIDENT_FAIL
          else []),
        *([f"judge: score {rubric.score}/5"] if rubric.score <= 2 else []),
    ]  # fmt: skip
    if high:
        return "high", high
    moderate = [
        *(["citation rules: moderate risk"] if rules_risk == "moderate" else []),
        *(["judge: moderate hallucination risk"] if rubric.hallucination_risk == "moderate" else []),
        *([f"judge: fail with confidence {rubric.confidence:.2f}"] if failed else []),
        *([f"judge: score {rubric.score}/5"] if rubric.score == 3 else []),
    ]
    if moderate:
        return "moderate", moderate
    return "low", ["no rule or judge condition for a higher risk"]


class RagJudgePrefilter:
    """An LLM judge of the whole answer (one call, or two with judge_two_step) plus the citation rules."""

    name = "rag-judge"

    def __init__(self, ctx: StageContext) -> None:
        self._client = ctx.client
        self._config = ctx.config
        self._two_step = ctx.config.prefilter.judge_two_step
        names = ("rag_judge_freeform", "rag_judge_convert") if self._two_step else ("rag_judge",)
        self._prompts = [load_prompt(name, ctx.prompts_dir) for name in names]

    def prompt_hashes(self) -> dict[str, str]:
        return {p.name: p.sha256 for p in self._prompts}

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        return PrefilterDecision(name=self.name, decision="pass", reason="the judge rates the whole answer")

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        if plan.sources is None:
            return None
        values = {
            "question": plan.question or "(none)",
            "sources": "\n".join(f"[{s.id}] {s.text}" for s in plan.sources) or "(none)",
            "answer": response,
        }
        usage = Usage()
        if self._two_step:
            freeform, convert = self._prompts
            system, user = freeform.render(**values)
            reply = await self._client.complete(
                ChatRequest(
                    messages=[ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)],
                    purpose="rag-judge:freeform",
                )
            )  # fmt: skip
            usage = usage + reply.usage
            if not reply.text.strip():
                raise ReplyUnusableError("the judge's free-form judgment is empty")
            system, user = convert.render(judgment=reply.text.strip())
            purpose = "rag-judge:convert"
        else:
            system, user = self._prompts[0].render(**values)
            purpose = "rag-judge"
        chat = converse(self._client, system, schema=JUDGE_SCHEMA, schema_name="judgment", purpose=purpose)
        outcome = await ask_structured(
            chat, user, parse_judgment, max_retries=self._config.debate.max_parse_retries, expected=_EXPECTED
        )
        usage = usage + Usage.total(r.usage for r in chat.responses)
        rubric = outcome.unwrap()
        rules = citation_check(response, plan.sources, variant=self._config.prefilter.citation_variant)
        risk, reasons = combine_risk(rules, rubric)
        judgment = RagJudgment(
            **rubric.model_dump(), two_step=self._two_step, rules_risk=rules.risk_level, combined_risk=risk,
            combined_reasons=reasons,
        )  # fmt: skip
        reason = f"judge {rubric.decision} (score {rubric.score}/5); combined risk {risk}: {'; '.join(reasons)}"
        return ResponseCheck(name=self.name, risk_level=risk, reason=reason, judge=judgment, usage=usage)

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        return None

    def note(self) -> str | None:
        return None


PREFILTERS.register("rag-judge", RagJudgePrefilter, description="an LLM judge of the whole RAG answer + the rules")
