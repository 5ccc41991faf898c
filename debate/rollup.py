"""Rolling claim verdicts up to the response. An unverifiable claim is never counted as factual.

Response score (in [0, 1], higher = more factual), the mean over all claims of a per-claim credit:
- verified factual, severity s:     1 - 0.1 * s          (1.0 for s=0 down to 0.5 for s=5)
- verified not factual, severity s: 0.08 * (5 - s)       (0.4 for s=0 down to 0.0 for s=5)
- not enough evidence, unverifiable: 0                    (never credited)
so every factual claim outranks every non-factual one, and severity orders claims within each side. A response
with no claims has no score (None).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from debate.plugins import ROLLUPS, Rollup, stage_options
from debate.types import ClaimLabel, ClaimRatios, ClaimVerdict, RollupName

__all__ = [
    "REFCHECKER_LABELS",
    "SoftOptions",
    "claim_credit",
    "claim_ratios",
    "refchecker_soft",
    "response_p_factual",
    "response_score",
    "roll_up",
]


def claim_credit(claim: ClaimVerdict) -> float:
    """A claim's contribution to the response score (see the module docstring)."""
    if claim.label not in ("factual", "non_factual") or claim.error_severity is None:
        return 0.0
    if claim.factual:
        return 1.0 - 0.1 * claim.error_severity
    return 0.08 * (5 - claim.error_severity)


def response_score(claims: Sequence[ClaimVerdict]) -> float | None:
    """The mean claim credit (module docstring); None for a response with no claims."""
    if not claims:
        return None
    return sum(claim_credit(c) for c in claims) / len(claims)


def claim_ratios(claims: Sequence[ClaimVerdict]) -> ClaimRatios:
    """The shares of factual, non-factual and unverifiable claims (RefChecker's ratios; all 0 with no claims)."""
    n = len(claims)
    if n == 0:
        return ClaimRatios(factual=0.0, non_factual=0.0, unverifiable=0.0)
    counts = Counter(c.label for c in claims)
    return ClaimRatios(
        factual=counts["factual"] / n,
        non_factual=counts["non_factual"] / n,
        not_enough_evidence=counts["not_enough_evidence"] / n,
        unverifiable=counts[None] / n,
    )


REFCHECKER_LABELS: dict[ClaimLabel, str] = {
    "factual": "Entailment",
    "non_factual": "Contradiction",
    "not_enough_evidence": "Neutral",
}
"""Our claim labels under RefChecker's names."""


def refchecker_soft(claims: Sequence[ClaimVerdict]) -> dict[str, float]:
    """RefChecker's `soft` aggregation: the share of each label, `Abstain` 1.0 when there are no claims (claims
    left unverifiable by a failure have no RefChecker label: they are not counted)."""
    labels = [REFCHECKER_LABELS[c.label] for c in claims if c.label is not None]
    if not labels:
        return {"Entailment": 0.0, "Neutral": 0.0, "Contradiction": 0.0, "Abstain": 1.0}
    shares = dict.fromkeys(("Entailment", "Neutral", "Contradiction", "Abstain"), 0.0)
    for label in labels:
        shares[label] += 1.0
    return {key: value / len(labels) for key, value in shares.items()}


_NO_CLAIMS = Rollup(None, "no_claims", "the response has no checkable claims")
_BY_LABEL: dict[ClaimLabel, Rollup] = {
    "factual": Rollup(True, "factual"),
    "non_factual": Rollup(False, "non_factual"),
    "not_enough_evidence": Rollup(None, "not_enough_evidence", "the evidence cannot decide some claims"),
}


def _failed(claims: Sequence[ClaimVerdict], why: str) -> Rollup:
    failed = sum(1 for c in claims if c.label is None)
    return Rollup(None, "unverifiable", f"{why}: {failed} of {len(claims)} claims failed")


def any_false_rule(claims: Sequence[ClaimVerdict], options: None = None) -> Rollup:
    """The paper's rule, which is also RefChecker's `strict` (zero tolerance: Contradiction, else Neutral, else
    Entailment). A failed claim could be false: without a false claim, a failure leaves the response unverifiable."""
    if not claims:
        return _NO_CLAIMS
    labels = {c.label for c in claims}
    if "non_factual" in labels:
        return _BY_LABEL["non_factual"]
    if None in labels:
        return _failed(claims, "no claim is false, but")
    return _BY_LABEL["not_enough_evidence" if "not_enough_evidence" in labels else "factual"]


def major_rule(claims: Sequence[ClaimVerdict], options: None = None) -> Rollup:
    """RefChecker's `major`: Counter(labels).most_common(1), so a tie goes to the label met first in claim order.
    Unverifiable when the failed claims could change the winner."""
    if not claims:
        return _NO_CLAIMS
    labels = [c.label for c in claims if c.label is not None]
    failed = len(claims) - len(labels)
    if not labels:
        return _failed(claims, "no claim has a label")
    counts = Counter(labels)
    winner, top = counts.most_common(1)[0]
    if failed and (failed >= top or any(n + failed >= top for label, n in counts.items() if label != winner)):
        return _failed(claims, "the failed claims could change the majority")
    return _BY_LABEL[winner]


class SoftOptions(BaseModel):
    """The `soft` rollup's options (`rollup_options.soft`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    threshold: float = Field(default=0.5, ge=0, le=1)
    """The Entailment (factual) share a response needs to be called factual."""


class SoftRule:
    """RefChecker's `soft` ratios (see `refchecker_soft`; RefChecker stops there). The verdict is ours: factual when
    the Entailment share reaches the threshold, decided only when the failed claims could not change it."""

    Options = SoftOptions

    def __call__(self, claims: Sequence[ClaimVerdict], options: SoftOptions | None = None) -> Rollup:
        threshold = (options or SoftOptions()).threshold
        if not claims:
            return _NO_CLAIMS
        n = len(claims)
        low = sum(1 for c in claims if c.label == "factual") / n
        high = low + sum(1 for c in claims if c.label is None) / n
        if low >= threshold:
            return _BY_LABEL["factual"]
        if high < threshold:
            return _BY_LABEL["non_factual"]
        why = f"the failed claims decide whether the Entailment share reaches {threshold}"
        return Rollup(None, "unverifiable", why)


soft_rule = SoftRule()
# These are the entry points of markov_debate.rollups; under our three claim labels RefChecker's `strict` is the
# paper's `any-false` (the same rule under both names).


def rollup_options(rule: RollupName, options: Mapping[str, Any] | None) -> BaseModel | None:
    """Rollup `rule`'s options as its own model (its defaults when none are given); None for a rule that declares
    none."""
    model = stage_options(ROLLUPS, rule)
    return model.model_validate(options or {}) if model is not None else None


def roll_up(
    claims: Sequence[ClaimVerdict], *, rule: RollupName = "any-false", options: Mapping[str, Any] | None = None
) -> Rollup:
    """The response's verdict by the registered rollup `rule`, given its options (`rollup_options.<rule>`).

    Raises:
        UnknownNameError: no rollup is registered as `rule`.
    """
    return ROLLUPS.get(rule)(claims, rollup_options(rule, options))


def _count_distribution(ps: Sequence[float]) -> list[float]:
    """P(exactly k of independent events happen), k = 0..len(ps) (the Poisson-binomial, by convolution)."""
    dist = [1.0]
    for p in ps:
        grown = [*dist, 0.0]
        dist = [grown[k] * (1 - p) + (grown[k - 1] * p if k else 0.0) for k in range(len(grown))]
    return dist


def _p_major(ps: Sequence[float]) -> float:
    # most_common(1) breaks a tie by the label met first: the first claim's
    n, first = len(ps), ps[0]
    return sum(
        q * (first * (2 * (k + 1) >= n) + (1 - first) * (2 * k > n)) for k, q in enumerate(_count_distribution(ps[1:]))
    )


def response_p_factual(
    claims: Sequence[ClaimVerdict], *, rule: RollupName = "any-false", options: Mapping[str, Any] | None = None
) -> tuple[float | None, str | None]:
    """P(the rollup calls the response factual), from the claims' p_factual taken as independent, and why there is
    none when there is none. any-false (strict): every claim is factual; major: factual claims outnumber the others
    (a tie to the first claim's label); soft: the factual share reaches its threshold (`options`)."""
    if not claims:
        return None, "the response has no checkable claims"
    missing = [c.claim_id for c in claims if c.p_factual is None]
    if missing:
        return None, f"claim(s) {', '.join(missing)} have no p_factual (a prefilter decided, or a turn failed)"
    ps = [c.p_factual for c in claims if c.p_factual is not None]
    if rule in ("any-false", "strict"):
        product = 1.0
        for p in ps:
            product *= p
        return product, None
    if rule == "soft":
        dist = _count_distribution(ps)
        threshold = SoftOptions.model_validate(options or {}).threshold
        return sum(q for k, q in enumerate(dist) if k / len(ps) >= threshold), None
    if rule == "major":
        return _p_major(ps), None
    return None, f"the {rule} rollup has no probability rule"
