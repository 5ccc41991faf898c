"""Rolling claim verdicts up to the response. An unverifiable claim is never counted as factual.

Response score (in [0, 1], higher = more factual), the mean over all claims of a per-claim credit:
- verified factual, severity s:     1 - 0.1 * s          (1.0 for s=0 down to 0.5 for s=5)
- verified not factual, severity s: 0.08 * (5 - s)       (0.4 for s=0 down to 0.0 for s=5)
- unverifiable:                     0                    (never credited)
so every factual claim outranks every non-factual one, and severity orders claims within each side. A response
with no claims has no score (None).
"""

from __future__ import annotations

from collections.abc import Sequence

from debate.stages import ROLLUPS, Rollup
from debate.types import ClaimRatios, ClaimVerdict, RollupName

__all__ = ["claim_credit", "claim_ratios", "response_score", "roll_up"]


def claim_credit(claim: ClaimVerdict) -> float:
    """A claim's contribution to the response score (see the module docstring)."""
    if claim.status != "verified" or claim.error_severity is None:
        return 0.0
    if claim.factual:
        return 1.0 - 0.1 * claim.error_severity
    return 0.08 * (5 - claim.error_severity)


def response_score(claims: Sequence[ClaimVerdict]) -> float | None:
    if not claims:
        return None
    return sum(claim_credit(c) for c in claims) / len(claims)


def claim_ratios(claims: Sequence[ClaimVerdict]) -> ClaimRatios:
    n = len(claims)
    if n == 0:
        return ClaimRatios(factual=0.0, non_factual=0.0, unverifiable=0.0)
    factual = sum(1 for c in claims if c.factual is True)
    non_factual = sum(1 for c in claims if c.factual is False)
    return ClaimRatios(factual=factual / n, non_factual=non_factual / n, unverifiable=(n - factual - non_factual) / n)


_NO_CLAIMS = Rollup(None, "no_claims", "the response has no checkable claims")
_FACTUAL = Rollup(True, "factual")
_NON_FACTUAL = Rollup(False, "non_factual")


def _any_false(claims: Sequence[ClaimVerdict], threshold: float) -> Rollup:
    """The paper's rule; also RefChecker's `strict` (zero tolerance: Contradiction > Neutral > Entailment)."""
    if not claims:
        return _NO_CLAIMS
    if any(c.factual is False for c in claims):
        return _NON_FACTUAL
    unverifiable = sum(1 for c in claims if c.status == "unverifiable")
    if unverifiable:
        return Rollup(None, "unverifiable", f"no claim is false, but {unverifiable} of {len(claims)} are unverifiable")
    return _FACTUAL


def _major(claims: Sequence[ClaimVerdict], threshold: float) -> Rollup:
    """RefChecker's `major`: the most common claim label; ties go to the more cautious label."""
    if not claims:
        return _NO_CLAIMS
    r = claim_ratios(claims)
    ranked = sorted(
        [(r.non_factual, 2, "non_factual"), (r.unverifiable, 1, "unverifiable"), (r.factual, 0, "factual")],
        reverse=True,
    )
    label = ranked[0][2]
    if label == "factual":
        return _FACTUAL
    if label == "non_factual":
        return _NON_FACTUAL
    return Rollup(None, "unverifiable", "most claims are unverifiable")


def _soft(claims: Sequence[ClaimVerdict], threshold: float) -> Rollup:
    """RefChecker's `soft` ratios, decided by the score against `threshold` only when the unverifiable claims
    could not change the decision (score with them credited 0 and credited 1)."""
    if not claims:
        return _NO_CLAIMS
    low = response_score(claims) or 0.0
    high = low + sum(1 for c in claims if c.status == "unverifiable") / len(claims)
    if low >= threshold:
        return _FACTUAL
    if high < threshold:
        return _NON_FACTUAL
    return Rollup(None, "unverifiable", f"the unverifiable claims decide whether the score reaches {threshold}")


ROLLUPS.register("any-false", _any_false, description="the paper's rule: non-factual if any claim is")
# Under our three claim labels RefChecker's `strict` is the paper's `any-false`.
ROLLUPS.register("strict", _any_false, description="RefChecker's strict (= any-false under our labels)")
ROLLUPS.register("soft", _soft, description="RefChecker's soft: the severity-weighted score against a threshold")
ROLLUPS.register("major", _major, description="RefChecker's major: the most common claim label")


def roll_up(claims: Sequence[ClaimVerdict], *, rule: RollupName = "any-false", soft_threshold: float = 0.5) -> Rollup:
    return ROLLUPS.get(rule)(claims, soft_threshold)
