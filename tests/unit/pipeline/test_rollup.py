from __future__ import annotations

import pytest

from debate.rollup import claim_credit, claim_ratios, refchecker_soft, response_score, roll_up
from debate.types import ClaimVerdict, Failure


def nee() -> ClaimVerdict:
    return ClaimVerdict(
        claim_id="c",
        text="t",
        status="verified",
        label="not_enough_evidence",
        factual=None,
        error_severity=0,
        evidence=[],
        debate=None,
    )


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


T, F, U, N = v(True), v(False, 4), v(None), nee()


@pytest.mark.parametrize("rule", ["any-false", "strict", "soft", "major"])
def test_no_claims_is_its_own_verdict(rule: str) -> None:
    outcome = roll_up([], rule=rule)
    assert (outcome.factual, outcome.verdict) == (None, "no_claims")
    assert response_score([]) is None
    assert claim_ratios([]).model_dump() == {
        "factual": 0.0,
        "non_factual": 0.0,
        "not_enough_evidence": 0.0,
        "unverifiable": 0.0,
    }


@pytest.mark.parametrize("rule", ["any-false", "strict", "soft", "major"])
def test_all_unverifiable_is_never_factual(rule: str) -> None:
    outcome = roll_up([U, U], rule=rule)
    assert (outcome.factual, outcome.verdict) == (None, "unverifiable")


@pytest.mark.parametrize(
    ("claims", "any_false", "major", "soft"),
    [
        ([T, T, T], "factual", "factual", "factual"),
        ([T, T, F], "non_factual", "factual", "factual"),  # soft: Entailment share 2/3 >= 0.5
        ([T, F, F], "non_factual", "non_factual", "non_factual"),  # soft: 1/3 < 0.5
        ([T, T, U], "unverifiable", "factual", "factual"),  # soft low bound 2/3 >= 0.5
        ([T, U, U], "unverifiable", "unverifiable", "unverifiable"),  # soft: 1/3 < 0.5 <= 3/3
        ([F, U, U], "non_factual", "unverifiable", "unverifiable"),  # soft: 0 < 0.5 <= 2/3
        ([F, F, U], "non_factual", "non_factual", "non_factual"),  # soft: high bound 1/3 < 0.5
        # RefChecker's major is Counter.most_common(1): a tie goes to the label met first.
        ([T, F], "non_factual", "factual", "factual"),
        ([F, T], "non_factual", "non_factual", "factual"),
        # Not enough evidence (RefChecker's Neutral): strict is Contradiction, else Neutral, else Entailment.
        ([T, N], "not_enough_evidence", "factual", "factual"),
        ([N, T], "not_enough_evidence", "not_enough_evidence", "factual"),
        ([N, T, F], "non_factual", "not_enough_evidence", "non_factual"),
        # The failed claim could make T tie N: major cannot tell; soft: 1/4 < 0.5 <= 2/4.
        ([N, N, T, U], "unverifiable", "unverifiable", "unverifiable"),
        ([N, N, N, T, U], "unverifiable", "not_enough_evidence", "non_factual"),
    ],
)
def test_rollups_on_mixed_claims(claims: list[ClaimVerdict], any_false: str, major: str, soft: str) -> None:
    assert roll_up(claims, rule="any-false").verdict == any_false
    assert roll_up(claims, rule="strict").verdict == any_false
    assert roll_up(claims, rule="major").verdict == major
    assert roll_up(claims, rule="soft").verdict == soft


async def test_the_soft_threshold_is_the_soft_rollup_s_option() -> None:
    """`rollup_options.soft.threshold` (a saved 0.2 `soft_threshold` loads as it); checked when the Verifier is
    built, with the field named."""
    from debate import ScriptedChatClient, Verifier, VerifierConfig
    from debate.errors import UsageError

    assert roll_up([T, T, F], rule="soft", options={"threshold": 0.7}).verdict == "non_factual"
    assert roll_up([T, T, F], rule="soft", options={"threshold": 0.6}).verdict == "factual"
    saved = VerifierConfig.model_validate({"rollup": "soft", "soft_threshold": 0.7})
    assert saved.rollup_options == {"soft": {"threshold": 0.7}}
    assert VerifierConfig.model_validate({"soft_threshold": 0.5}).rollup_options == {}
    with pytest.raises(UsageError, match=r"^rollup_options.soft: threshold: Input should be less than or equal to 1"):
        Verifier(config=VerifierConfig(rollup_options={"soft": {"threshold": 2}}), client=ScriptedChatClient([]))
    with pytest.raises(UsageError, match=r"^rollup_options: rollup 'major' takes no options"):
        Verifier(config=VerifierConfig(rollup_options={"major": {"threshold": 0.5}}), client=ScriptedChatClient([]))


def test_score_formula() -> None:
    assert [claim_credit(c) for c in (v(True, 0), v(True, 1), v(True, 5))] == [1.0, 0.9, 0.5]
    assert [claim_credit(c) for c in (v(False, 0), v(False, 3), v(False, 5))] == pytest.approx([0.4, 0.16, 0.0])
    assert claim_credit(U) == 0.0
    assert response_score([v(True, 1), v(False, 3), U]) == pytest.approx((0.9 + 0.16 + 0.0) / 3)
    ratios = claim_ratios([T, F, U, U])
    assert (ratios.factual, ratios.non_factual, ratios.unverifiable) == (0.25, 0.25, 0.5)
    assert claim_credit(N) == 0.0 and claim_ratios([N, T]).not_enough_evidence == 0.5


def test_refchecker_soft_ratios() -> None:
    """RefChecker's soft_agg: the share of each label; Abstain 1.0 with no claims."""
    assert refchecker_soft([T, N, F, F]) == {"Entailment": 0.25, "Neutral": 0.25, "Contradiction": 0.5, "Abstain": 0.0}
    assert refchecker_soft([]) == {"Entailment": 0.0, "Neutral": 0.0, "Contradiction": 0.0, "Abstain": 1.0}


def test_label_and_factual_must_agree() -> None:
    with pytest.raises(ValueError, match="needs factual"):
        ClaimVerdict(
            claim_id="c",
            text="t",
            status="verified",
            label="not_enough_evidence",
            factual=True,
            error_severity=0,
            evidence=[],
            debate=None,
        )
    # A record written before labels existed gets its label from `factual`.
    old = T.model_dump(exclude={"label"})
    assert ClaimVerdict.model_validate(old).label == "factual"
