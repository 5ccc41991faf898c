"""The `rag-judge` prefilter: the RAG rules' LLM-as-a-judge of a whole RAG answer, combined with its citation rules.

When the judge is called (its option `when`): the source says it twice, differently. Its decision flow ("判定流程") runs
the rules first, calls a rules risk score above 0.6 high at once, and otherwise calls the judge and combines both;
its implementation advice ("多層檢測策略") calls the judge only on moderate rules risk. We follow the decision flow
(`flow`, the default) because the source's own low-risk criteria include the judge's hallucination_risk <= 0.3,
which cannot hold without asking it; `moderate` is the advice, a named variant; `always` judges every answer with
claims. The combined decision then follows the seed's criteria:
- high if any of: the rules' risk is high (score > 0.6, an invalid citation, 3 or more uncited long sentences, or a
  ratio below 0.3 with 3 or more claims); the judge's hallucination_risk > 0.6; the judge's notes name an
  unsupported claim;
- moderate if any of: the rules' risk is moderate; the judge's hallucination_risk is in (0.3, 0.6];
- low otherwise.
The seed's risk table then gives the action: low accept, moderate refine_search, high reject. A high combined risk
feeds the cascade: no prefilter may decide a claim of the answer factual. The judge never decides a claim by itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from debate.calls import ask_structured, converse, load_json_object, load_prompt
from debate.config import VerifierConfig
from debate.errors import ReplyUnusableError, validation_problem
from debate.llm import ChatMessage, ChatRequest
from debate.plugins import Plan, StageContext
from debate.prefilter._base import BasePrefilter
from debate.prefilter._citations import citation_check, rule_conditions
from debate.types import (
    CitationReport,
    Claim,
    Evidence,
    JudgeRubric,
    PrefilterDecision,
    RagJudgment,
    ResponseCheck,
    RiskAction,
    RiskLevel,
    Usage,
)

__all__ = [
    "HIGH_RISK",
    "JUDGE_SCHEMA",
    "MODERATE_RISK",
    "RagJudgeOptions",
    "RagJudgePrefilter",
    "combine_risk",
    "judge_risk",
    "parse_judgment",
    "unsupported_claims",
]

HIGH_RISK = 0.6
"""A judge's hallucination_risk above this is high risk (the RAG rules)."""
MODERATE_RISK = 0.3
"""Above this (up to HIGH_RISK) it is moderate."""

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reasoning": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "decision": {"type": "string", "enum": ["continue", "refine_search", "synthesize"]},
        "hallucination_risk": {"type": "number", "minimum": 0, "maximum": 1},
        "hallucination_notes": {"type": "string"},
    },
    "required": ["score", "reasoning", "confidence", "decision", "hallucination_risk", "hallucination_notes"],
    "additionalProperties": False,
}
_EXPECTED = (
    'a JSON object {"score": 0.0-1.0, "reasoning": "...", "confidence": 0.0-1.0, "decision": "continue", '
    '"refine_search" or "synthesize", "hallucination_risk": 0.0-1.0, "hallucination_notes": "..."}'
)
# Spaces and tabs only, and one greedy group stripped afterwards: nested \s* runs across lines backtrack for ever
# on a reply of blank lines.
_UNSUPPORTED = re.compile(r"^[ \t]*[-*]?[ \t]*unsupported claim[ \t]*:(.*)$", re.IGNORECASE | re.MULTILINE)
_ACTIONS: dict[RiskLevel, RiskAction] = {"low": "accept", "moderate": "refine_search", "high": "reject"}


def parse_judgment(text: str) -> JudgeRubric:
    """The judge's JSON in the seed's shape; anything else is an unusable reply (re-asked)."""
    raw = load_json_object(text)
    if isinstance(raw.get("decision"), str):
        raw["decision"] = raw["decision"].strip().lower().replace(" ", "_").replace("-", "_")
    try:
        return JudgeRubric.model_validate(raw)
    except ValidationError as exc:
        raise ReplyUnusableError(validation_problem(exc, "reply")) from exc


def unsupported_claims(notes: str) -> list[str]:
    """The claims the notes name as unsupported, one per "Unsupported claim: ..." line ("None" names none)."""
    named = [m.strip().strip("\"'“”") for m in _UNSUPPORTED.findall(notes)]
    return [claim for claim in named if claim and claim.lower() not in ("none", "none.", "n/a")]


def judge_risk(rubric: JudgeRubric) -> RiskLevel:
    """The judge's own level: high above 0.6 or when its notes name an unsupported claim, moderate above 0.3."""
    if rubric.hallucination_risk > HIGH_RISK or unsupported_claims(rubric.hallucination_notes):
        return "high"
    return "moderate" if rubric.hallucination_risk > MODERATE_RISK else "low"


def combine_risk(rules: CitationReport, rubric: JudgeRubric | None) -> tuple[RiskLevel, list[str]]:
    """The RAG rules' combined decision (module docstring), with the conditions that hold."""
    if rules.risk_level == "none" and rubric is None:
        return "none", [rules.note or "nothing to check"]
    named = unsupported_claims(rubric.hallucination_notes) if rubric else []
    risk = rubric.hallucination_risk if rubric else 0.0
    rules_high, rules_moderate = rule_conditions(rules)
    high = [
        *(f"rules: {reason}" for reason in rules_high),
        *([f"judge: hallucination_risk {risk:.2f} > {HIGH_RISK}"] if risk > HIGH_RISK else []),
        *([f"judge: {len(named)} unsupported claim(s) named"] if named else []),
    ]
    if high:
        return "high", high
    moderate = [
        *(f"rules: {reason}" for reason in rules_moderate),
        *([f"judge: hallucination_risk {risk:.2f} in (0.3, 0.6]"] if MODERATE_RISK < risk <= HIGH_RISK else []),
    ]
    if moderate:
        return "moderate", moderate
    return "low", ["no rule or judge condition for a higher risk"]


def _judge_wanted(judge_on: str, rules: CitationReport) -> bool:
    if rules.risk_level == "none":
        return False
    if judge_on == "moderate":
        return rules.risk_level == "moderate"
    return judge_on == "always" or rules.hallucination_risk_score <= HIGH_RISK


class RagJudgeOptions(BaseModel):
    """The `rag-judge` prefilter's options (`prefilter.options.rag-judge`). Citations are read as the task reads
    them (task_options.rag.citation_variant)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    when: Literal["flow", "moderate", "always"] = "flow"
    """When the judge is called. flow (default, the RAG rules' decision flow): on every answer with claims unless the
    rules' risk score is above 0.6 (high at once); the low-risk criteria need the judge's own risk, so a low rules
    risk is judged too. moderate (a named variant, the same source's layered suggestion): only when the rules find
    moderate risk. always: on every answer with claims."""
    two_step: bool = False
    """First a free-form, self-critical judgment, then a second call converts it into the seed's JSON."""
    convert_model: str | None = None
    """With two_step: the (smaller) model on the same endpoint that converts the judgment; None: the judge's."""


class RagJudgePrefilter(BasePrefilter[RagJudgeOptions]):
    """The RAG rules + judge: the judge (one call, or two with two_step) runs as `when` says."""

    name = "rag-judge"

    def __init__(self, ctx: StageContext) -> None:
        super().__init__(ctx)
        self._client = ctx.client
        self._config = ctx.config
        self._two_step = self.options.two_step
        self._judge_on = self.options.when
        self._convert_model = self.options.convert_model if self._two_step else None
        names = ("rag_judge_freeform", "rag_judge_convert") if self._two_step else ("rag_judge",)
        self._prompts = [load_prompt(name, ctx.prompts_dir) for name in names]

    def prompt_hashes(self) -> dict[str, str]:
        return {p.name: p.sha256 for p in self._prompts}

    @staticmethod
    def expected_calls(claims: float, config: VerifierConfig) -> tuple[float, float]:
        """Model calls per response (`--estimate`): the judge's one call (two with two_step), which the rules
        may make unnecessary unless `when` is always."""
        options = config.prefilter.options_for("rag-judge", RagJudgeOptions)
        calls = 2.0 if options.two_step else 1.0
        return (calls if options.when == "always" else 0.0), calls

    @staticmethod
    def may_decide(config: VerifierConfig) -> bool:
        """The judge never decides a claim by itself."""
        return False

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        return PrefilterDecision(name=self.name, decision="pass", reason="the judge rates the whole answer")

    async def _judge(self, response: str, plan: Plan) -> tuple[JudgeRubric, Usage]:
        sources = plan.sources or []
        values = {
            "question": plan.question or "(none)",
            "sources": "\n".join(f"[{s.id}] {s.text}" for s in sources) or "(none)",
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
            )
            usage = usage + reply.usage
            if not reply.text.strip():
                raise ReplyUnusableError("the judge's free-form judgment is empty")
            system, user = convert.render(judgment=reply.text.strip())
            purpose = "rag-judge:convert"
        else:
            system, user = self._prompts[0].render(**values)
            purpose = "rag-judge"
        chat = converse(
            self._client,
            system,
            schema=JUDGE_SCHEMA,
            schema_name="judgment",
            purpose=purpose,
            model=self._convert_model,
        )
        outcome = await ask_structured(
            chat, user, parse_judgment, max_retries=self._config.debate.max_parse_retries, expected=_EXPECTED
        )
        return outcome.unwrap(), usage + outcome.usage

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        if plan.sources is None:
            return None
        rules = citation_check(response, plan.sources, variant=plan.citation_variant)
        wanted = _judge_wanted(self._judge_on, rules)
        rubric, usage = await self._judge(response, plan) if wanted else (None, Usage())
        risk, reasons = combine_risk(rules, rubric)
        judgment = RagJudgment(
            rubric=rubric,
            judge_risk=judge_risk(rubric) if rubric else None,
            unsupported_claims=unsupported_claims(rubric.hallucination_notes) if rubric else [],
            two_step=self._two_step and rubric is not None,
            convert_model=self._convert_model if rubric else None,
            rules_risk=rules.risk_level,
            combined_risk=risk,
            combined_reasons=reasons,
            action=_ACTIONS.get(risk),
        )
        called = (
            f"judge {rubric.decision} (score {rubric.score:.2f}, risk {rubric.hallucination_risk:.2f})"
            if rubric
            else f"judge not called (rules risk {rules.risk_level})"
        )
        reason = f"{called}; combined risk {risk}: {'; '.join(reasons)}"
        return ResponseCheck(
            name=self.name, risk_level=risk, reason=reason, citation=rules, judge=judgment, usage=usage
        )
