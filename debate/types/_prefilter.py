"""What the prefilters say: per claim (a decision) and per response (a check), and their summary."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from debate.types._core import Usage, _Model
from debate.types._grounding import GroundingResult, HallucinationCheck
from debate.types._names import PrefilterName, RiskLevel
from debate.types._rag import CitationReport, RagJudgment

__all__ = ["PrefilterDecision", "PrefilterSummary", "ResponseCheck"]


class PrefilterDecision(_Model):
    """What one cheap check said about a claim."""

    name: PrefilterName
    """Which prefilter."""
    decision: Literal["pass", "factual", "non_factual", "skipped"]
    """pass: not confident, the debate decides; skipped: the check could not run."""
    reason: str
    """Why."""
    error_severity: int | None = Field(default=None, ge=0, le=5)
    """Severity of the verdict, when the prefilter decided (factual or non_factual)."""
    grounding: GroundingResult | None = None
    """The logprob signals, for the logprob prefilter."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of the check."""


class ResponseCheck(_Model):
    """What a prefilter found about a whole response (before or after its claims were judged)."""

    name: PrefilterName
    """Which prefilter."""
    risk_level: RiskLevel
    """none (nothing to check), low, moderate or high; a high risk before the claims keeps every claim in the
    debate (no prefilter may decide one factual)."""
    reason: str
    """Why, in one line."""
    citation: CitationReport | None = None
    """The citation rules' report (rules)."""
    judge: RagJudgment | None = None
    """The LLM judge's rubric (rag-judge)."""
    hallucination_check: HallucinationCheck | None = None
    """The grounding block (logprob)."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of the check."""


class PrefilterSummary(_Model):
    """What the prefilter cascade did for a response."""

    prefilters: list[PrefilterName]
    """Which prefilters ran, in order."""
    checks: list[ResponseCheck] = Field(default_factory=list)
    """Response-level findings, in prefilter order."""
    risk_level: RiskLevel = "none"
    """The highest risk among the checks made before the claims (it decides whether prefilters may decide a
    claim factual)."""
    decided: int = Field(ge=0)
    """Claims decided without a debate."""
    prefilter_calls: int = Field(ge=0)
    """Model calls the prefilters made."""
    debate_calls_saved: int = Field(ge=0)
    """Debate calls not made, counted at the minimum a debate costs (1 + 3 * min_rounds per claim): gross."""
    net_calls_saved: int = 0
    """debate_calls_saved minus the prefilters' own calls (negative when the checks cost more than they saved)."""
    note: str | None = None
    """E.g. that the endpoint gives no logprobs."""

    def _find(self, field: str) -> Any:
        return next((getattr(c, field) for c in self.checks if getattr(c, field) is not None), None)

    @property
    def citation(self) -> CitationReport | None:
        """The citation rules' report, when the rules ran on a RAG answer."""
        return self._find("citation")  # type: ignore[no-any-return]

    @property
    def hallucination_check(self) -> HallucinationCheck | None:
        """The seed's grounding block, when the logprob check scored claims of a RAG answer."""
        return self._find("hallucination_check")  # type: ignore[no-any-return]

    @property
    def judge(self) -> RagJudgment | None:
        """The rag-judge's rubric, when it ran."""
        return self._find("judge")  # type: ignore[no-any-return]
