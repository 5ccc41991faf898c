"""From a verification's report to the answer's risk, and from the risk and the policy to what the guard does.

Risk, highest first: high when a claim is contradicted by its sources, a check before the claims found high risk
(an invalid citation, too little cited), or with a calibration the probability of a factual answer is below
`block_below`; moderate when a claim has not enough evidence or could not be verified, or a check found moderate
risk; low otherwise; none when the answer has no checkable claim. A verification that could not run (the judge
down or slow, past the deadline) is no risk level: `on_failure` decides.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.results import transient_failure
from debate.types import ClaimLabel, Failure, Report, ReportVerdict, RiskLevel, Span
from markov_debate.desk.models import GuardAction
from markov_debate.desk.store.visibility import hidden_in_text
from markov_debate.guard.settings import DebateMode, FailureMode, Policy, RouteSettings, StreamMode

__all__ = ["Action", "Flagged", "Verification", "act", "failed", "verification"]

Action = GuardAction
"""What the guard did with the answer (the desk filters its audits by it)."""
Status = Literal["verified", "partial", "unverified"]

_ORDER: tuple[RiskLevel, ...] = ("none", "low", "moderate", "high")


class Flagged(BaseModel):
    """A claim of the answer that was not found factual."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    claim_id: str
    """The claim's id in the audit's report."""
    text: str
    """The claim (a sentence of the answer, for a RAG answer)."""
    label: ClaimLabel | None
    """non_factual, not_enough_evidence, or None when it could not be verified."""
    reason: str
    """Why, in one line."""
    spans: list[Span] = Field(default_factory=list)
    """Where it is in the answer."""


class Verification(BaseModel):
    """What the guard found and did, added to the response as `verification` (and `x-debate-*` headers)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    request_id: str
    """The request's id (also the audit's `x-debate-item`, and the response's `x-debate-request-id`)."""
    status: Status
    """verified: every claim has a verdict; partial: some wait for a later debate or could not be verified;
    unverified: the verification could not run (see notes)."""
    verdict: ReportVerdict | None
    """The answer's verdict (None when unverified)."""
    p_factual: float | None = None
    """The probability that the answer is factual, with a calibration."""
    risk: RiskLevel | None
    """The answer's risk (None when unverified)."""
    reasons: list[str] = Field(default_factory=list)
    """Why the risk is what it is."""
    action: Action
    """What the guard did."""
    policy: Policy
    debate: DebateMode
    sources: int = 0
    """How many sources the request carried."""
    flagged: list[Flagged] = Field(default_factory=list)
    """The claims not found factual."""
    notes: list[str] = Field(default_factory=list)
    """What the reader should know: no sources, claims waiting for the debate, a failure."""
    audit_id: int | None = None
    """The audit on the desk that keeps this decision (None until it is stored)."""


def _risk(report: Report, block_below: float | None) -> tuple[RiskLevel, list[str]]:
    risk: RiskLevel = "none" if report.verdict == "no_claims" else "low"
    reasons: list[str] = []

    def raise_to(level: RiskLevel, why: str) -> None:
        nonlocal risk
        reasons.append(why)
        if _ORDER.index(level) > _ORDER.index(risk):
            risk = level

    summary = report.prefilter
    if summary is not None:
        for check in summary.checks:
            if check.risk_level in ("moderate", "high"):
                raise_to(check.risk_level, f"{check.name}: {check.reason}")
    for number, claim in enumerate(report.claims, 1):
        # The reasons reach the end user (a block message quotes them): which statement of the answer, never the
        # engine's claim id, which means nothing to them, nor the statement's words, which the block withholds
        # (`flagged` keeps both for the caller).
        said = f"statement {number} of {len(report.claims)}"
        if claim.label == "non_factual":
            raise_to("high", f"{said} is contradicted by the sources")
        elif claim.label == "not_enough_evidence":
            raise_to("moderate", f"{said} has not enough evidence")
        elif claim.label is None and (claim.failure is None or claim.failure.kind != "deferred"):
            raise_to("moderate", f"{said} could not be verified")
    if block_below is not None and report.p_factual is not None and report.p_factual < block_below:
        raise_to("high", f"P(factual) = {report.p_factual:.2f} is below {block_below:g}")
    return risk, reasons


_TOLD = {
    "model_unavailable": "the judge is not reachable",
    "timeout": "the judge took too long",
    "model_rejected": "the judge refused the request",
    "context_too_long": "the answer and its sources are too long for the judge",
}
"""A failure as the caller reads it: its kind said plainly. The message itself (the judge's address, its error
text) is the operator's, in the stored report and the guard's log."""


def told(failure: Failure) -> str:
    """What the caller is told of `failure`: the plain words for its kind, else its message with every address
    taken out."""
    return _TOLD.get(failure.kind) or hidden_in_text(failure.message) or failure.kind


def _flagged(report: Report) -> list[Flagged]:
    out = []
    for claim in report.claims:
        if claim.label == "factual" or (claim.failure is not None and claim.failure.kind == "deferred"):
            continue
        why = claim.reason or (told(claim.failure) if claim.failure else "") or str(claim.label)
        out.append(Flagged(claim_id=claim.claim_id, text=claim.text, label=claim.label, reason=why, spans=claim.spans))
    return out


def verification(
    report: Report, *, request_id: str, chosen: RouteSettings, block_below: float | None, sources: int
) -> Verification | str:
    """The verification a report gives, with the action still to choose (`act`); or why it counts as failed (the
    response failed, or a claim failed for a reason that may pass: the judge down, a timeout)."""
    if report.failure is not None:
        return f"{report.failure.stage}: {told(report.failure)}"
    transient = transient_failure(report)
    if transient is not None:
        return f"{transient.stage}: {told(transient)}"
    risk, reasons = _risk(report, block_below)
    deferred = sum(1 for c in report.claims if c.failure is not None and c.failure.kind == "deferred")
    unverified = sum(1 for c in report.claims if c.label is None)
    notes = list(report.note.split("; ")) if report.note else []
    if deferred:
        notes.append(f"{deferred} claim(s) are debated after the answer was returned; the verdict is the cheap checks'")
    return Verification(
        request_id=request_id,
        status="partial" if unverified else "verified",
        verdict=None if deferred else report.verdict,
        p_factual=report.p_factual,
        risk=risk,
        reasons=reasons,
        action="passed",
        policy=chosen.policy or "annotate",
        debate=chosen.debate or "inline",
        sources=sources,
        flagged=_flagged(report),
        notes=notes,
    )


def failed(why: str, *, request_id: str, chosen: RouteSettings, sources: int) -> Verification:
    """The verification of an answer that could not be checked: passed marked so, or refused (`on_failure`)."""
    mode: FailureMode = chosen.on_failure or "open"
    return Verification(
        request_id=request_id,
        status="unverified",
        verdict=None,
        risk=None,
        action="passed-unverified" if mode == "open" else "refused",
        policy=chosen.policy or "annotate",
        debate=chosen.debate or "inline",
        sources=sources,
        notes=[f"not verified: {why}"],
    )


def act(found: Verification, chosen: RouteSettings, *, stream: StreamMode | None = None) -> Verification:
    """`found` with the action its policy takes. A streamed-as-it-comes answer has been read before it was checked:
    block cannot apply, so a risky one is flagged and the note says so."""
    if found.status == "unverified":
        return found
    at = _ORDER.index(chosen.act_at or "high")
    risky = found.risk is not None and _ORDER.index(found.risk) >= at
    policy = chosen.policy or "annotate"
    notes = list(found.notes)
    action: Action
    if policy == "annotate":
        action = "annotated"
    elif not risky:
        action = "passed"
    elif policy == "block" and stream == "pass":
        action = "flagged"
        notes.append("streamed as it came (--stream pass): it could not be blocked, so it is flagged for review")
    else:
        action = "blocked" if policy == "block" else "flagged"
    return found.model_copy(update={"action": action, "notes": notes})
