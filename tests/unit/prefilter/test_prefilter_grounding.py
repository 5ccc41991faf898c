"""Logprob grounding: the formulas with hand-computed numbers, and the check over real HTTP with chosen logprobs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from debate.config import ModelConfig
from debate.llm import ChatRequest, ChatResponse, TokenLogprob, TopLogprob
from debate.llm._openai_client import OpenAIChatClient
from debate.plugins import TaskInput
from debate.prefilter import LogprobGroundingCheck, grounding_score, kl_bernoulli, yes_probability
from debate.prefilter._grounding import CLAIM_WARNING, hallucination_check, response_warning
from debate.types import Usage
from tests.support.fakes import Call, FakeOpenAI, Reply

LN2 = math.log(2)


def test_kl_bernoulli_in_nats_with_clipping() -> None:
    # 0.9 ln(0.9/0.5) + 0.1 ln(0.1/0.5) = 0.52901 - 0.16094
    assert kl_bernoulli(0.9, 0.5) == pytest.approx(0.368064, abs=1e-6)
    assert kl_bernoulli(0.5, 0.5) == 0.0
    # Clipped to [1e-12, 1 - 1e-12]: KL(1 || 0) = ln(1e12) instead of infinity.
    assert kl_bernoulli(1.0, 0.0) == pytest.approx(math.log(1e12), rel=1e-9)
    assert kl_bernoulli(0.0, 0.0) == pytest.approx(0.0, abs=1e-9)


def test_cited_claim_that_uses_its_evidence_is_grounded() -> None:
    r = grounding_score(0.6, 0.2, True, budget="strawberry")
    assert r.evidence_use == pytest.approx(0.4)
    assert r.confidence == pytest.approx(0.6)  # 1.5 * 0.4, no bonus (p1 <= 0.7)
    assert r.grounded is True
    # observed KL(0.6||0.2) = 0.6 ln 3 + 0.4 ln 0.5 = 0.381909 nats; required KL(0.95||0.2) = 1.341608 nats
    assert r.observed_bits == pytest.approx(0.381909 / LN2, abs=1e-5)
    assert r.required_bits == pytest.approx(1.341608 / LN2, abs=1e-5)
    assert r.budget_gap_bits == pytest.approx((1.341608 - 0.381909) / LN2, abs=1e-5)
    assert r.flagged is False and r.band == "minor extrapolation"  # flagged means not grounded


def test_seed_budget_gap_is_observed_minus_required() -> None:
    """Seed 002 "KL Divergence Calculation": budget gap = observed_bits - required_bits, observed = KL(Ber(p1) ||
    Ber(0.5)), required = KL(Ber(p1) || Ber(p0)); the seed has no bands."""
    r = grounding_score(0.92, 0.25, True)  # the seed's example claim
    assert r.budget == "seed" and r.band is None
    assert r.observed_bits == pytest.approx(kl_bernoulli(0.92, 0.5) / LN2)
    assert r.required_bits == pytest.approx(kl_bernoulli(0.92, 0.25) / LN2)
    assert r.budget_gap_bits == pytest.approx((kl_bernoulli(0.92, 0.5) - kl_bernoulli(0.92, 0.25)) / LN2)
    # An uncited claim (p0 = p1) needs no bits from its sources: the gap is all it observed.
    uncited = grounding_score(0.9, 0.9, False)
    assert uncited.required_bits == pytest.approx(0.0) and uncited.budget_gap_bits == pytest.approx(
        kl_bernoulli(0.9, 0.5) / LN2
    )


def test_the_seed_example_confidences_do_not_follow_its_formula() -> None:
    """Seed 002 "Response Format" prints confidence 0.88 for p1 0.92 / p0 0.25 (cited) and 0.15 for 0.45 / 0.42
    (uncited); its own computeGroundingScore gives min(1, 1.5 * 0.67 + 0.3) = 1.0 and 0.4 * 0.45 = 0.18. We follow
    the formula; the grounded flags agree with the example."""
    cited, uncited = grounding_score(0.92, 0.25, True), grounding_score(0.45, 0.42, False)
    assert (cited.confidence, cited.grounded) == (1.0, True)
    assert uncited.confidence == pytest.approx(0.18) and uncited.grounded is False


# Seed 002 "Testing", as (claim, cited ids, p1, p0) -> the hallucination_check block.
SUPPORTED = ("Paris is the capital of France.", ["1"], 0.92, 0.25)
CONTRADICTED = ("Lyon is the capital of France.", ["1"], 0.05, 0.05)
CONFABULATED = ("Paris has exactly ten million cats.", ["1"], 0.30, 0.28)
IGNORES_SOURCE = ("The Seine is 777 km long.", ["2"], 0.90, 0.88)
UNCITED_CONFIDENT: tuple[str, list[str], float, float] = (
    "Water boils at 100 degrees Celsius at sea level.",
    [],
    0.90,
    0.90,
)


def _block(*claims: tuple[str, list[str], float, float]) -> Any:
    return hallucination_check([(t, c, grounding_score(p1, p0, bool(c))) for t, c, p1, p0 in claims])


def test_seed_test_1_a_fully_supported_claim_is_not_flagged() -> None:
    block = _block(SUPPORTED)
    claim = block.claims[0]
    assert (claim.grounded, claim.citing, claim.warning) == (True, ["1"], None)
    assert (block.overall_grounded, block.grounded_claims, block.total_claims, block.warning) == (True, 1, 1, None)
    result = grounding_score(0.92, 0.25, True)
    assert result.flagged is False and result.band is None  # never "minor extrapolation"


@pytest.mark.parametrize("case", [CONTRADICTED, CONFABULATED], ids=["test-2-contradicts", "test-3-confabulated"])
def test_seed_tests_2_and_3_a_contradicted_or_confabulated_claim_is_flagged(
    case: tuple[str, list[str], float, float],
) -> None:
    block = _block(case)
    claim = block.claims[0]
    assert claim.grounded is False and claim.warning == CLAIM_WARNING
    assert block.overall_grounded is False and block.warning == response_warning(1)
    result = grounding_score(case[2], case[3], True)
    assert result.flagged is True and result.band is None  # never "supported"


def test_seed_test_4_mixed_support_gets_the_right_flags_and_warnings() -> None:
    block = _block(SUPPORTED, CONTRADICTED, SUPPORTED, UNCITED_CONFIDENT, CONFABULATED)
    assert [c.grounded for c in block.claims] == [True, False, True, True, False]
    assert [c.warning is not None for c in block.claims] == [False, True, False, False, True]
    assert (block.grounded_claims, block.total_claims, block.grounding_ratio) == (3, 5, pytest.approx(0.6))
    assert block.overall_grounded is False and block.warning == response_warning(2)


def test_the_response_warning_appears_even_when_overall_grounded() -> None:
    """Seed 002's example block: overall_grounded true with 3 of 4 claims grounded, and the top-level warning."""
    block = _block(SUPPORTED, SUPPORTED, SUPPORTED, IGNORES_SOURCE)
    assert block.overall_grounded is True and block.grounding_ratio == 0.75
    assert block.warning == response_warning(1) and block.claims[3].warning == CLAIM_WARNING


def test_the_70_percent_rule() -> None:
    seven = _block(*[SUPPORTED] * 7, *[IGNORES_SOURCE] * 3)
    assert seven.grounding_ratio == pytest.approx(0.7) and seven.overall_grounded is True
    two_of_three = _block(SUPPORTED, SUPPORTED, IGNORES_SOURCE)
    assert two_of_three.overall_grounded is False
    empty = hallucination_check([])
    assert (empty.overall_grounded, empty.total_claims, empty.grounding_ratio, empty.warning) == (False, 0, 0.0, None)


def test_confidence_bonus_and_cap() -> None:
    high = grounding_score(0.9, 0.3, True)
    assert high.confidence == 1.0  # min(1, 1.5 * 0.6 + 0.3)
    weak = grounding_score(0.9, 0.85, True)
    assert weak.confidence == pytest.approx(1.5 * 0.05 + 0.3)
    assert weak.grounded is False  # confidence 0.375 <= 0.45


def test_cited_claim_that_ignores_its_evidence_is_not_grounded() -> None:
    r = grounding_score(0.95, 0.95, True)
    assert r.evidence_use == 0.0 and r.confidence == pytest.approx(0.3) and r.grounded is False


def test_uncited_claims() -> None:
    confident = grounding_score(0.8, 0.8, False)
    assert confident.confidence == pytest.approx(0.56) and confident.grounded is True
    unsure = grounding_score(0.5, 0.5, False)
    assert unsure.confidence == pytest.approx(0.2) and unsure.grounded is False


@pytest.mark.parametrize(
    ("p1", "p0", "band", "flagged"),
    [
        (0.99, 0.01, "supported", False),
        (0.9, 0.3, "minor extrapolation", False),
        (0.1, 0.001, "suspicious", True),
        (0.01, 1e-6, "likely hallucination", True),
    ],
)
def test_budget_bands(p1: float, p0: float, band: str, flagged: bool) -> None:
    r = grounding_score(p1, p0, True, budget="strawberry")
    assert r.band == band and r.flagged is flagged
    expected = (kl_bernoulli(0.95, p0) - kl_bernoulli(p1, p0)) / LN2
    assert r.budget_gap_bits == pytest.approx(expected)


def test_budget_in_nats_on_request() -> None:
    r = grounding_score(0.6, 0.2, True, unit="nats", budget="strawberry")
    assert r.unit == "nats" and r.budget_gap == pytest.approx(1.341608 - 0.381909, abs=1e-5)
    assert r.budget_gap_bits == pytest.approx(r.budget_gap / LN2)


def _response(token: str, alternatives: dict[str, float]) -> ChatResponse:
    top = [TopLogprob(token=t, logprob=math.log(p)) for t, p in alternatives.items()]
    return ChatResponse(
        text=token,
        usage=Usage(llm_calls=1),
        model="m",
        latency_s=0.0,
        logprobs=[TokenLogprob(token=token, logprob=math.log(alternatives.get(token, 0.01)), top=top)],
    )


def test_yes_probability_sums_yes_spellings() -> None:
    assert yes_probability(_response("YES", {"YES": 0.5, " Yes": 0.2, "NO": 0.3})) == pytest.approx(0.7)
    assert yes_probability(_response("NO", {"NO": 0.9, "UNSURE": 0.1})) == 0.0
    plain = ChatResponse(text="YES", usage=Usage(llm_calls=1), model="m", latency_s=0.0)
    assert yes_probability(plain) is None


def _logprob_reply(call: Call) -> Reply:
    """The grounding route, a rule-based model: P(YES) 0.9 with the sources in view, 0.3 once a cited source is
    redacted from what it is asked."""
    p_yes = 0.3 if "[REDACTED]" in call.asked else 0.9
    top: list[dict[str, Any]] = [
        {"token": "YES", "logprob": math.log(p_yes), "bytes": None},
        {"token": "NO", "logprob": math.log(1 - p_yes), "bytes": None},
    ]
    first = top[0] if p_yes >= 0.5 else top[1]
    return Reply(content=first["token"], logprobs=[{**first, "top_logprobs": top}])


async def test_check_over_http_reads_p1_and_p0_from_logprobs() -> None:
    sources = {"1": "Paris is the capital of France.", "2": "Unrelated."}
    with FakeOpenAI(routes={"grounding": _logprob_reply}) as server:
        client = OpenAIChatClient(config=ModelConfig(base_url=server.base_url, model="fake-model"))
        check = LogprobGroundingCheck(client)
        cited, cited_usage = await check.check_claim("Paris is the capital of France.", ["1"], sources)
        uncited, uncited_usage = await check.check_claim("It has many museums.", [], sources)
        await client.aclose()
    assert cited is not None and uncited is not None
    assert cited.p1 == pytest.approx(0.9) and cited.p0 == pytest.approx(0.3)
    assert cited.grounded is True and cited.confidence == 1.0
    assert uncited.p0 == uncited.p1 == pytest.approx(0.9)  # nothing to redact: the same context twice
    assert uncited.confidence == pytest.approx(0.63) and uncited.grounded is True
    assert (cited_usage.llm_calls, uncited_usage.llm_calls) == (2, 2)  # seed 002: "2 API calls per claim"
    sent = [r for r in server.requests]
    assert all(r["logprobs"] is True and r["top_logprobs"] == 10 and r["max_tokens"] == 1 for r in sent)
    assert all("purpose" not in r for r in sent)  # our routing label is never sent to the endpoint
    redacted = [r for r in sent if "[REDACTED]" in r["messages"][-1]["content"]]
    assert len(redacted) == 1
    assert "[1] [REDACTED]" in redacted[0]["messages"][-1]["content"]
    assert "[2] Unrelated." in redacted[0]["messages"][-1]["content"]


async def test_endpoint_without_logprobs_is_skipped_not_guessed() -> None:
    with FakeOpenAI(responder=lambda body: Reply(content="YES")) as server:
        client = OpenAIChatClient(config=ModelConfig(base_url=server.base_url, model="fake-model"))
        check = LogprobGroundingCheck(client)
        result, usage = await check.check_claim("Paris is the capital of France.", ["1"], {"1": "Paris."})
        await client.aclose()
    assert result is None and usage.llm_calls == 1  # asked once, nothing guessed


async def test_at_most_max_claims_are_checked() -> None:
    from debate import DebateConfig, Verifier, VerifierConfig
    from debate.config import PrefilterConfig
    from debate.testing import ScriptedChatClient
    from tests.support.helpers import op

    def grounding(request: ChatRequest) -> ChatResponse:
        return _response("YES", {"YES": 0.6, "NO": 0.4})

    client = ScriptedChatClient({"grounding": [grounding] * 2, "debate": [op(True)] * 5})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(
            prefilters=["logprob"],
            options={"logprob": {"max_claims": 2, "trust_grounded": True, "grounded_confidence": 0.5}},
        ),
    )
    claims = [f"Sentence number {i} is long enough." for i in range(5)]
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput("five sentences", claims=claims), task="general")
    decisions = [c.prefilters[0] for c in report.claims]
    assert [d.usage.llm_calls for d in decisions] == [1, 1, 0, 0, 0]
    assert "confidence cannot reach 0.5" in decisions[0].reason  # P(yes) 0.6 without evidence: at most 0.24
    assert decisions[2].reason == "beyond the first 2 claims of the response"
    assert client.purposes().count("grounding") == 2 and client.remaining == 0
