"""The `logprob` prefilter: the logprob grounding check (debate.prefilter._grounding) as a stage of the cascade,
with when it runs, what it may decide and the grounding block it adds to a RAG answer's report."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.config import VerifierConfig
from debate.plugins import Plan, StageContext
from debate.prefilter._base import BasePrefilter
from debate.prefilter._citations import known_source_ids
from debate.prefilter._grounding import (
    LogprobGroundingCheck,
    context_with_sources,
    max_confidence,
    response_hallucination_check,
    warning_language,
)
from debate.sentences import claim_length
from debate.types import Claim, ClaimVerdict, Evidence, PrefilterDecision, ResponseCheck, RiskLevel, Usage

__all__ = ["LogprobOptions", "LogprobPrefilter"]

log = logging.getLogger(__name__)


_NO_LOGPROBS = "the endpoint returned no logprobs; the logprob check is skipped"
_CANNOT_DECIDE = (
    "not run: outside RAG answers the logprob check can only decide a claim, and it decides nothing without "
    "trust_grounded (--prefilter.options logprob.trust_grounded=true)"
)


class LogprobOptions(BaseModel):
    """The `logprob` prefilter's options (`prefilter.options.logprob`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    trust_grounded: bool = False
    """Let a strongly grounded claim skip the debate (decided factual)."""
    grounded_confidence: float = Field(default=0.8, ge=0, le=1)
    """Grounding confidence a claim needs to skip the debate (with trust_grounded)."""
    max_claims: int = Field(default=10, ge=1, le=100_000)
    """Claims checked per response."""
    min_chars: int = Field(default=15, ge=0)
    """Shorter claims are skipped."""
    target: float = Field(default=0.95, gt=0, lt=1)
    """The confidence the information budget is computed for (strawberry budget only)."""
    budget: Literal["seed", "strawberry"] = "seed"
    """seed (Strawberry grounding: gap = KL(p1||0.5) - KL(p1||p0), no bands) or strawberry (a named departure: the
    Strawberry paper's gap = KL(target||p0) - KL(p1||p0) with its bands); see debate.prefilter.grounding_score."""
    budget_unit: Literal["nats", "bits"] = "nats"
    """The unit the budget gap is reported in. nats (default): the source's formula uses the natural logarithm (it
    calls the result bits); bits divides by ln 2."""
    top_logprobs: int = Field(default=10, ge=1, le=20)
    """Alternatives read at the answer token."""


class LogprobPrefilter(BasePrefilter[LogprobOptions]):
    """Logprob grounding: with `trust_grounded`, a strongly grounded claim is decided factual without a debate.

    On RAG answers every claim is scored (the seed's hallucination_check block reports them all). Elsewhere the check
    only runs to decide, and skips the calls that cannot: see `check`."""

    name = "logprob"

    def __init__(self, ctx: StageContext) -> None:
        super().__init__(ctx)
        self._config = self.options
        self._check = LogprobGroundingCheck(
            ctx.client,
            target=self.options.target,
            top_logprobs=self.options.top_logprobs,
            prompts_dir=ctx.prompts_dir,
            budget=self.options.budget,
            unit=self.options.budget_unit,
        )
        self._language = ctx.config.language
        self.logprobs_unavailable = False

    def prompt_hashes(self) -> dict[str, str]:
        return {"grounding": self._check.prompt_hash}

    @staticmethod
    def expected_calls(claims: float, config: VerifierConfig) -> tuple[float, float]:
        """Model calls per response (`--estimate`): none when a claim cannot be decided by grounding, up to two
        one-token calls for each of the first max_claims claims."""
        return 0.0, 2.0 * min(claims, config.prefilter.options_for("logprob", LogprobOptions).max_claims)

    @staticmethod
    def may_decide(config: VerifierConfig) -> bool:
        """Whether it may decide a claim without a debate (`--estimate`'s note): with trust_grounded."""
        return config.prefilter.options_for("logprob", LogprobOptions).trust_grounded

    def _beyond(self) -> str:
        return f"beyond the first {self._config.max_claims} claims of the response"

    def _no_logprobs(self, usage: Usage) -> PrefilterDecision:
        if not self.logprobs_unavailable:
            log.warning(_NO_LOGPROBS)
        self.logprobs_unavailable = True
        return self._skip(_NO_LOGPROBS, usage)

    def _skip(self, reason: str, usage: Usage | None = None) -> PrefilterDecision:
        return PrefilterDecision(name=self.name, decision="skipped", reason=reason, usage=usage or Usage())

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        cfg = self._config
        if self.logprobs_unavailable:
            return self._skip(_NO_LOGPROBS)
        site = f"{claim.id}:grounding"
        if claim_length(claim.text) < cfg.min_chars:
            return self._skip(f"shorter than {cfg.min_chars} characters")
        if index >= cfg.max_claims:
            return self._skip(self._beyond())
        if plan.sources is not None:
            context = {s.id: s.text for s in plan.sources}
            cited = set(claim.citations)
            cited_ids = [
                s.id for s in plan.sources if s.id in cited or (s.parent_id is not None and s.parent_id in cited)
            ]
            known = known_source_ids(plan.sources)
            invalid = [c for c in claim.citations if c not in known]
            result, usage = await self._check.check_claim(claim.text, cited_ids, context, site=site, invalid=invalid)
        else:
            # Outside RAG answers the check's only use is deciding (there is no grounding report to fill), so it
            # makes no call that cannot change a decision: none at all without trust_grounded, none when no P(yes)
            # could reach the threshold, and no second call when the first already rules it out.
            if not cfg.trust_grounded:
                return self._skip(_CANNOT_DECIDE)
            # The claim's evidence plays the cited sources: does it raise P(YES)?
            context = {f"E{i}": e.text for i, e in enumerate(evidence, start=1)}
            cited_ids = list(context)
            if max_confidence(1.0, bool(cited_ids)) < cfg.grounded_confidence:
                return self._skip(f"no evidence: confidence cannot reach {cfg.grounded_confidence}")
            p1, usage = await self._check.probability(claim.text, context_with_sources(context, []), site=f"{site}:p1")
            if p1 is None:
                return self._no_logprobs(usage)
            if max_confidence(p1, bool(cited_ids)) < cfg.grounded_confidence:
                reason = f"p1={p1:.3f}: confidence cannot reach {cfg.grounded_confidence}; no second call made"
                return self._skip(reason, usage)
            result, more = await self._check.score(claim.text, p1, cited_ids, context, site=site)
            usage = usage + more
        if result is None:
            return self._no_logprobs(usage)
        summary = (
            f"p1={result.p1:.3f} p0={result.p0:.3f} confidence={result.confidence:.2f} "
            f"grounded={result.grounded} budget gap={result.budget_gap:.2f} {result.unit}"
            + (f" ({result.band})" if result.band else "")
            + (
                f"; cites source(s) that were not given: {', '.join(result.invalid_citations)}"
                if result.invalid_citations
                else ""
            )
        )
        if cfg.trust_grounded and result.grounded and result.confidence >= cfg.grounded_confidence:
            return PrefilterDecision(
                name=self.name,
                decision="factual",
                reason=f"strongly grounded: {summary}",
                error_severity=0,
                grounding=result,
                usage=usage,
            )
        return PrefilterDecision(name=self.name, decision="pass", reason=summary, grounding=result, usage=usage)

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        response = " ".join(c.text for c in plan.claims)
        block = response_hallucination_check(verdicts, plan, warning_language(self._language, response))
        if block is None:
            return None
        risk: RiskLevel = "low" if block.overall_grounded else "high"
        reason = block.warning or f"{block.grounded_claims} of {block.total_claims} claims grounded"
        beyond = sum(1 for v in verdicts for d in v.prefilters if d.name == self.name and d.reason == self._beyond())
        if beyond:
            reason += f"; {beyond} claim(s) beyond the first {self._config.max_claims} were not scored (the cap)"
        return ResponseCheck(name=self.name, risk_level=risk, reason=reason, hallucination_check=block)

    def note(self) -> str | None:
        return _NO_LOGPROBS if self.logprobs_unavailable else None
