"""The logprob grounding prefilter's outputs (Strawberry grounding): per-claim signals and the response-level block."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from debate.types._core import _Model
from debate.types._names import GroundingBand

__all__ = ["GroundedClaim", "GroundingResult", "HallucinationCheck"]


class GroundingResult(_Model):
    """The logprob grounding signals for one claim (debate.prefilter.grounding_score)."""

    p1: float = Field(ge=0, le=1)
    """P(YES | full context)."""
    p0: float = Field(ge=0, le=1)
    """P(YES | cited sources redacted); for an uncited claim, nothing is redacted (a second call all the same)."""
    has_citations: bool
    """Whether the claim cites sources."""
    evidence_use: float = Field(ge=0, le=1)
    """max(0, p1 - p0)."""
    confidence: float = Field(ge=0, le=1)
    """Cited: min(1, 1.5 * use + (0.3 if p1 > 0.7 else 0)); uncited: 0.7 * p1 if p1 > 0.7 else 0.4 * p1."""
    grounded: bool
    """confidence > 0.45 and (use > 0.15 or uncited), and no citation names a source that was not given."""
    invalid_citations: list[str] = Field(default_factory=list)
    """Cited ids that name no given source (a missing source supports nothing: the claim is not grounded)."""
    budget: Literal["seed", "strawberry"] = "seed"
    """Which information-budget definition the next fields follow."""
    observed_bits: float
    """seed: KL(Ber(p1) || Ber(0.5)); strawberry: KL(Ber(p1) || Ber(p0)); in bits."""
    required_bits: float
    """seed: KL(Ber(p1) || Ber(p0)); strawberry: KL(Ber(target) || Ber(p0)); in bits."""
    budget_gap: float
    """seed: observed - required; strawberry: required - observed; in `unit`."""
    unit: Literal["bits", "nats"] = "nats"
    """Unit of budget_gap."""
    budget_gap_bits: float
    """budget_gap in bits."""
    flagged: bool
    """Not grounded (the seed's meaning; a supported claim is never flagged)."""
    band: GroundingBand | None = None
    """strawberry budget only: < 0 supported, 0-2 minor extrapolation, 2-10 suspicious, > 10 likely hallucination
    (bits); None under the seed's budget, which has no bands."""


class GroundedClaim(_Model):
    """One claim in the seed's `hallucination_check` block."""

    text: str
    """The claim."""
    citing: list[str]
    """The source ids it cites, as written (a cited id that names no given source included)."""
    p1: float = Field(ge=0, le=1)
    """P(YES | full context)."""
    p0: float = Field(ge=0, le=1)
    """P(YES | cited sources redacted)."""
    confidence: float = Field(ge=0, le=1)
    """The grounding confidence (GroundingResult.confidence)."""
    grounded: bool
    """Whether the claim is grounded (GroundingResult.grounded)."""
    warning: str | None = None
    """Why an ungrounded claim is suspect."""


class HallucinationCheck(_Model):
    """The seed's response-level grounding block for a RAG answer (logprob prefilter)."""

    overall_grounded: bool
    """At least 70% of the checked claims are grounded."""
    grounded_claims: int = Field(ge=0)
    """Claims found grounded."""
    total_claims: int = Field(ge=0)
    """Claims the logprob check scored."""
    grounding_ratio: float = Field(ge=0, le=1)
    """grounded_claims / total_claims (0 without claims)."""
    claims: list[GroundedClaim]
    """Per claim, in claim order."""
    warning: str | None = None
    """Set whenever any claim is ungrounded, even when the answer is overall grounded (Strawberry grounding)."""
