from __future__ import annotations

import pytest

from debate.rollup import claim_credit, claim_ratios, response_score, roll_up
from debate.types import ClaimVerdict, Failure


def v(factual: bool | None, severity: int | None = 0) -> ClaimVerdict:
    if factual is None:
        return ClaimVerdict(
            claim_id="c",
            text="t",
            status="unverifiable",
            factual=None,
            reason="x",
            evidence=[],
            debate=None,
            failure=Failure(kind="model_unavailable", message="x", stage="debate", transient=True),
        )
    return ClaimVerdict(
        claim_id="c", text="t", status="verified", factual=factual, error_severity=severity, evidence=[], debate=None
    )


T, F, U = v(True), v(False, 4), v(None)


@pytest.mark.parametrize("rule", ["any-false", "strict", "soft", "major"])
def test_no_claims_is_its_own_verdict(rule: str) -> None:
    outcome = roll_up([], rule=rule)  # type: ignore[arg-type]
    assert (outcome.factual, outcome.verdict) == (None, "no_claims")
    assert response_score([]) is None
    assert claim_ratios([]).model_dump() == {"factual": 0.0, "non_factual": 0.0, "unverifiable": 0.0}


@pytest.mark.parametrize("rule", ["any-false", "strict", "soft", "major"])
def test_all_unverifiable_is_never_factual(rule: str) -> None:
    outcome = roll_up([U, U], rule=rule)  # type: ignore[arg-type]
    assert (outcome.factual, outcome.verdict) == (None, "unverifiable")


@pytest.mark.parametrize(
    ("claims", "any_false", "major", "soft"),
    [
        ([T, T, T], "factual", "factual", "factual"),
        ([T, T, F], "non_factual", "factual", "factual"),  # soft: (1+1+0.08)/3 = 0.693 >= 0.5
        ([T, F, F], "non_factual", "non_factual", "non_factual"),  # soft: 1.16/3 = 0.387 < 0.5
        ([T, T, U], "unverifiable", "factual", "factual"),  # soft low bound 2/3 >= 0.5
        ([T, U, U], "unverifiable", "unverifiable", "unverifiable"),  # soft: 1/3 < 0.5 <= 3/3
        ([F, U, U], "non_factual", "unverifiable", "unverifiable"),  # soft: 0.08/3 < 0.5 <= 2.08/3
        ([F, F, U], "non_factual", "non_factual", "non_factual"),  # soft: high bound 1.16/3 < 0.5
        ([T, F], "non_factual", "non_factual", "factual"),  # major tie -> cautious; soft (1 + .08)/2 = .54
    ],
)
def test_rollups_on_mixed_claims(claims: list[ClaimVerdict], any_false: str, major: str, soft: str) -> None:
    assert roll_up(claims, rule="any-false").verdict == any_false
    assert roll_up(claims, rule="strict").verdict == any_false
    assert roll_up(claims, rule="major").verdict == major
    assert roll_up(claims, rule="soft").verdict == soft


def test_score_formula() -> None:
    assert [claim_credit(c) for c in (v(True, 0), v(True, 1), v(True, 5))] == [1.0, 0.9, 0.5]
    assert [claim_credit(c) for c in (v(False, 0), v(False, 3), v(False, 5))] == pytest.approx([0.4, 0.16, 0.0])
    assert claim_credit(U) == 0.0
    assert response_score([v(True, 1), v(False, 3), U]) == pytest.approx((0.9 + 0.16 + 0.0) / 3)
    ratios = claim_ratios([T, F, U, U])
    assert (ratios.factual, ratios.non_factual, ratios.unverifiable) == (0.25, 0.25, 0.5)
