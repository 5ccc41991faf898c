"""The RAG citation rules' and judge's outputs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from debate.types._core import _Model
from debate.types._names import RiskLevel

__all__ = ["CitationReport", "JudgeRubric", "RagJudgment", "RiskAction"]


class CitationReport(_Model):
    """Outcome of the citation rules for one answer (debate.prefilter.citation_check)."""

    has_hallucination_risk: bool
    """hallucination_risk_score > 0.3."""
    hallucination_risk_score: float = Field(ge=0, le=1)
    """1 - min(citation_ratio, 1)."""
    risk_level: RiskLevel
    """none (nothing to check), low, moderate or high."""
    valid_citations: list[str]
    """Cited ids that are a known source or parent id (seed: distinct, first-seen order; occurrences: every one)."""
    invalid_citations: list[str]
    """The other cited ids, the same way."""
    uncited_sentences: list[str]
    """The first 3 sentences longer than 50 characters with no citation, each cut to 100 characters (the RAG rules)."""
    uncited_count: int = Field(default=0, ge=0)
    """How many such sentences there are in all (the high-risk rule counts them)."""
    citation_ratio: float = Field(ge=0)
    """len(valid_citations) / max(total_claims, 1)."""
    total_claims: int = Field(ge=0)
    """Sentences longer than 20 characters."""
    note: str | None = None
    """Set when there is nothing to check."""


JudgeDecision = Literal["continue", "refine_search", "synthesize"]
RiskAction = Literal["accept", "refine_search", "reject"]


class JudgeRubric(_Model):
    """The LLM judge's reply, in the seed's shape (the RAG rules "LLM 評估輸出格式")."""

    score: float = Field(ge=0, le=1)
    """Overall quality of the answer."""
    reasoning: str
    """The judge's reasons."""
    confidence: float = Field(ge=0, le=1)
    """How sure the judge is."""
    decision: JudgeDecision
    """continue (search on), refine_search (search for support), synthesize (the answer can be given)."""
    hallucination_risk: float = Field(ge=0, le=1)
    """The judge's hallucination risk: > 0.6 high, > 0.3 moderate."""
    hallucination_notes: str
    """What the judge found; each unsupported claim on a line starting "Unsupported claim:"."""


class RagJudgment(_Model):
    """The combined rules + judge decision for a RAG answer (the `rag-judge` prefilter, the RAG rules)."""

    rubric: JudgeRubric | None = None
    """The judge's reply; None when the decision flow did not call the judge (rules risk not moderate)."""
    judge_risk: RiskLevel | None = None
    """The judge's level from its hallucination_risk and notes; None when not called."""
    unsupported_claims: list[str] = Field(default_factory=list)
    """The unsupported claims the judge's notes name (any raises the risk to high)."""
    two_step: bool = False
    """Whether a free-form judgment was converted into the rubric by a second call."""
    convert_model: str | None = None
    """The model that converted it (two-step with a judge model); None: the judge's own model."""
    rules_risk: RiskLevel
    """The citation rules' risk level for the same answer."""
    combined_risk: RiskLevel
    """The seed's combined decision (debate.prefilter._judge.combine_risk)."""
    combined_reasons: list[str]
    """The conditions that set combined_risk."""
    action: RiskAction | None = None
    """What the seed's risk table does with the answer: low accept, moderate refine_search, high reject; None when
    there was nothing to check."""
    earlier_rubric: dict[str, Any] | None = None
    """A report stored by an earlier version (a 1-5 score and pass/fail) keeps that judge reply here, as stored."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_shape(cls, data: Any) -> Any:
        # Reports stored before the seed's judge (desk audits, results logs) must still load.
        if isinstance(data, dict) and "score" in data and "rubric" not in data:
            earlier = ("score", "reasoning", "confidence", "decision", "hallucination_risk", "hallucination_notes")
            data = dict(data)
            data["earlier_rubric"] = {k: data.pop(k) for k in earlier if k in data}
        return data
