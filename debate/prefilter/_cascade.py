"""The prefilter cascade: the configured prefilters, in order, before any debate. Response-level checks run first
(their worst risk level bounds what a claim-level check may clear); then, per claim, each prefilter in turn until
one decides the claim. A claim none decides goes to the debate with the decisions made so far."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from debate.errors import DebateError, is_fatal
from debate.plugins import Plan, Prefilter
from debate.types import (
    Claim,
    ClaimVerdict,
    Evidence,
    Failure,
    Opinion,
    PrefilterDecision,
    PrefilterSummary,
    ResponseCheck,
    RiskLevel,
    Usage,
)

__all__ = ["Cascade", "Undecided"]

_RISK_ORDER: tuple[RiskLevel, ...] = ("none", "low", "moderate", "high")


@dataclass(frozen=True)
class Undecided:
    """No prefilter decided the claim: the debate decides, and its verdict carries these decisions and usage."""

    decisions: list[PrefilterDecision]
    usage: Usage


class Cascade:
    """The configured prefilters, in their configured order."""

    def __init__(self, prefilters: Sequence[Prefilter], *, min_rounds: int) -> None:
        self.prefilters = list(prefilters)
        self._min_rounds = min_rounds

    async def check_response(self, response: str, plan: Plan) -> list[ResponseCheck] | Failure:
        """Every response-level check, or the failure of the first that could not run."""
        checks: list[ResponseCheck] = []
        for prefilter in self.prefilters:
            try:
                check = await prefilter.check_response(response, plan)
            except DebateError as exc:
                if is_fatal(exc):
                    raise
                return Failure.from_error(exc, f"prefilter:{prefilter.name}")
            if check is not None:
                checks.append(check)
        return checks

    @staticmethod
    def risk(checks: Sequence[ResponseCheck]) -> RiskLevel:
        """The worst risk level the response-level checks found."""
        return max((c.risk_level for c in checks), key=_RISK_ORDER.index, default="none")

    async def check_claim(
        self, index: int, claim: Claim, evidence: list[Evidence], usage: Usage, plan: Plan, risk: RiskLevel
    ) -> ClaimVerdict | Undecided:
        """The claim's verdict when a prefilter decides it (or fails), else what the debate should carry on."""
        decisions: list[PrefilterDecision] = []
        for prefilter in self.prefilters:
            try:
                decision = await prefilter.check(claim, index, evidence, plan)
            except DebateError as exc:
                if is_fatal(exc):
                    raise
                failure = Failure.from_error(exc, f"prefilter:{prefilter.name}")
                return ClaimVerdict.unverifiable(
                    claim, failure, evidence=evidence, debate=None, usage=usage, prefilters=decisions
                )
            if decision.decision == "factual" and risk == "high":
                # A high-risk answer is never cleared claim by claim without a debate.
                decision = decision.model_copy(
                    update={
                        "decision": "pass",
                        "reason": f"{decision.reason}; not decided: the response's risk is high",
                        "error_severity": None,
                    }
                )
            decisions.append(decision)
            usage = usage + decision.usage
            if decision.decision in ("factual", "non_factual"):
                return _decided(claim, evidence, usage, decisions, prefilter.name)
        return Undecided(decisions, usage)

    def summary(
        self, verdicts: Sequence[ClaimVerdict], plan: Plan, before: list[ResponseCheck], risk: RiskLevel
    ) -> PrefilterSummary | None:
        """What the cascade did over the response (None without prefilters)."""
        if not self.prefilters:
            return None
        after = [c for p in self.prefilters if (c := p.summarize(verdicts, plan)) is not None]
        notes = [note for p in self.prefilters if (note := p.note()) is not None]
        decided = sum(1 for c in verdicts if c.decided_by != "debate")
        calls = Usage.total([*(d.usage for c in verdicts for d in c.prefilters), *(c.usage for c in before)]).llm_calls
        # A decided claim saves S0 and at least min_rounds rounds of three turns.
        saved = decided * (1 + 3 * self._min_rounds)
        return PrefilterSummary(
            prefilters=[p.name for p in self.prefilters],
            checks=[*before, *after],
            risk_level=risk,
            decided=decided,
            prefilter_calls=calls,
            debate_calls_saved=saved,
            net_calls_saved=saved - calls,
            note="; ".join(notes) or None,
        )


def _decided(
    claim: Claim, evidence: list[Evidence], usage: Usage, decisions: list[PrefilterDecision], name: str
) -> ClaimVerdict:
    decision = decisions[-1]
    opinion = Opinion(
        opinion=decision.reason,
        factuality=decision.decision == "factual",
        error_severity=decision.error_severity if decision.error_severity is not None else 0,
    )
    return ClaimVerdict.verified(
        claim,
        opinion,
        evidence=evidence,
        debate=None,
        usage=usage,
        decided_by=f"prefilter:{name}",
        prefilters=decisions,
    )
