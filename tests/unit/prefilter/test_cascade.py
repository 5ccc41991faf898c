"""The prefilter cascade: which claims skip the debate, and what it saved."""

from __future__ import annotations

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import PrefilterConfig
from debate.llm import ChatRequest, ChatResponse
from debate.plugins import TaskInput
from debate.prefilter._grounding import CLAIM_WARNING, response_warning
from debate.testing import ScriptedChatClient, yes_no_response
from tests.support.helpers import op

SOURCES = {"1": "Paris is the capital and largest city of France.", "2": "The Seine flows through Paris."}
ANSWER = "Paris is the capital of France [1]. The Seine flows through Paris [2]. Paris has ten million cats [9]."


def _client(p: dict[str, tuple[float, float]] | None) -> ScriptedChatClient:
    """Agents always answer True; grounding calls get P(YES) per claim id: (with every source, cited ones redacted),
    routed by the call's purpose and site ("c0:grounding:p1"), never by its wording."""

    def reply(request: ChatRequest) -> str | ChatResponse:
        if request.purpose == "grounding":
            if p is None:
                return "YES"  # an endpoint that returns no logprobs
            assert request.site is not None
            claim_id, _, which = request.site.split(":")
            full, redacted = p[claim_id]
            return yes_no_response(full if which == "p1" else redacted)
        return op(True)

    return ScriptedChatClient([reply] * 60)


def _verifier(client: ScriptedChatClient, *, prefilters: list[str], min_rounds: int = 0, **options: object) -> Verifier:
    """`options` are the listed prefilters' options, each given to the prefilter that declares it."""
    owner = {"invalid_citation_decides": "rules", "trust_grounded": "logprob"}
    by_prefilter: dict[str, dict[str, object]] = {}
    for key, value in options.items():
        by_prefilter.setdefault(owner[key], {})[key] = value
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=min_rounds, max_rounds=max(min_rounds, 1)),
        prefilter=PrefilterConfig(prefilters=prefilters, options=by_prefilter),
        claim_concurrency=1,
    )
    return Verifier(config=config, client=client)


def _kinds(client: ScriptedChatClient) -> list[str]:
    return ["grounding" if c.request.purpose == "grounding" else "debate" for c in client.calls]


async def test_an_invalid_citation_raises_the_answer_risk_and_the_claim_is_debated() -> None:
    """Seed 000: an invalid citation is a high-risk indicator for the answer; it decides no claim."""
    client = _client(None)
    async with _verifier(client, prefilters=["rules"]) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert [c.decided_by for c in report.claims] == ["debate"] * 3
    cats = report.claims[2].prefilters[0]
    assert cats.decision == "pass" and "9" in cats.reason and "risk is high" in cats.reason
    assert report.prefilter is not None and report.prefilter.risk_level == "high"
    assert report.prefilter.citation is not None and report.prefilter.citation.invalid_citations == ["9"]


async def test_invalid_citation_decides_is_the_named_departure() -> None:
    client = _client(None)
    async with _verifier(client, prefilters=["rules"], invalid_citation_decides=True) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert [c.text for c in report.claims] == [  # markers and the final full stop removed, as seed 002 shows them
        "Paris is the capital of France",
        "The Seine flows through Paris",
        "Paris has ten million cats",
    ]
    assert [c.decided_by for c in report.claims] == ["debate", "debate", "prefilter:rules"]
    cats = report.claims[2]
    assert (cats.factual, cats.error_severity, cats.debate) == (False, 4, None)
    assert cats.prefilters[0].decision == "non_factual" and "9" in cats.prefilters[0].reason
    assert _kinds(client) == ["debate", "debate"]  # the cats claim cost no call
    assert report.claims[0].evidence[0].text == SOURCES["1"]  # a claim sees the source it cites
    assert report.verdict == "non_factual"
    summary = report.prefilter
    assert summary is not None and (summary.decided, summary.debate_calls_saved, summary.prefilter_calls) == (1, 1, 0)
    assert summary.citation is not None and summary.citation.invalid_citations == ["9"]
    assert summary.citation.risk_level == "high"


async def test_grounded_claims_skip_the_debate_only_when_trusted() -> None:
    probabilities = {"c0": (0.95, 0.10), "c1": (0.55, 0.50), "c2": (0.20, 0.20)}
    client = _client(probabilities)
    async with _verifier(client, prefilters=["logprob"], trust_grounded=True, min_rounds=2) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert [c.decided_by for c in report.claims] == ["prefilter:logprob", "debate", "debate"]
    capital = report.claims[0]
    assert (capital.factual, capital.error_severity, capital.debate) == (True, 0, None)
    grounding = capital.prefilters[0].grounding
    assert grounding is not None and grounding.p1 == pytest.approx(0.95) and grounding.p0 == pytest.approx(0.10)
    assert capital.usage.llm_calls == 2
    seine = report.claims[1]
    assert seine.prefilters[0].decision == "pass" and seine.debate is not None and seine.debate.rounds == 2
    # The cats claim cites a source that was not given: it cites (seed 002's claim-to-document map), nothing can be
    # redacted, and a missing source grounds nothing (seed 000: an invalid citation).
    cats = report.claims[2].prefilters[0]
    assert cats.grounding is not None and cats.grounding.has_citations is True
    assert (cats.grounding.grounded, cats.grounding.invalid_citations) == (False, ["9"])
    assert "cites source(s) that were not given: 9" in cats.reason
    summary = report.prefilter
    assert summary is not None and summary.decided == 1 and summary.debate_calls_saved == 7
    assert summary.prefilter_calls == 2 + 2 + 2  # seed 002: two calls per claim
    assert summary.net_calls_saved == 7 - 6  # the saved debate minus the grounding calls
    assert _kinds(client).count("debate") == 14
    # The seed's hallucination_check block: only the capital claim is grounded, 1 of 3 < 70%.
    block = summary.hallucination_check
    assert block is not None and (block.grounded_claims, block.total_claims) == (1, 3)
    assert block.overall_grounded is False and block.warning == response_warning(2)
    assert [c.citing for c in block.claims] == [["1"], ["2"], ["9"]]
    assert [c.grounded for c in block.claims] == [True, False, False]
    assert [c.warning for c in block.claims] == [None, CLAIM_WARNING, CLAIM_WARNING]


async def test_a_high_risk_answer_is_never_cleared_by_a_prefilter() -> None:
    """The response's rule risk feeds the cascade: with the rules' high risk (an invalid citation), a grounded claim
    still goes to the debate."""
    probabilities = {"c0": (0.95, 0.10), "c1": (0.55, 0.50), "c2": (0.20, 0.20)}
    client = _client(probabilities)
    async with _verifier(client, prefilters=["rules", "logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.risk_level == "high"
    capital = report.claims[0]
    assert capital.decided_by == "debate" and capital.prefilters[1].decision == "pass"
    assert "risk is high" in capital.prefilters[1].reason
    assert [c.decided_by for c in report.claims] == ["debate", "debate", "debate"]


async def test_without_trust_grounded_every_claim_is_debated() -> None:
    client = _client({"c0": (0.95, 0.10), "c1": (0.55, 0.50), "c2": (0.20, 0.20)})
    async with _verifier(client, prefilters=["logprob"]) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert [c.decided_by for c in report.claims] == ["debate"] * 3
    assert report.claims[0].prefilters[0].grounding is not None
    assert report.claims[0].prefilters[0].grounding.grounded is True


async def test_all_runs_rules_first_then_logprob() -> None:
    client = _client({"c0": (0.95, 0.10), "c1": (0.55, 0.50), "c2": (0.20, 0.20)})
    # Every claim cites a given source: the rules' risk is not high, so a grounded claim may be decided.
    answer = ANSWER.replace("[9]", "[2]")
    async with _verifier(client, prefilters=["rules", "logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(TaskInput(answer, reference=SOURCES), task="rag")
    assert report.prefilter is not None and report.prefilter.risk_level == "moderate"  # 2 distinct ids, 3 claims
    assert [c.decided_by for c in report.claims] == ["prefilter:logprob", "debate", "debate"]
    assert [d.name for d in report.claims[1].prefilters] == ["rules", "logprob"]
    assert _kinds(client).count("grounding") == 6


async def test_no_logprobs_is_said_once_and_nothing_is_decided() -> None:
    client = _client(None)
    async with _verifier(client, prefilters=["logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, reference=SOURCES), task="rag")
    assert [c.decided_by for c in report.claims] == ["debate"] * 3
    assert [c.prefilters[0].decision for c in report.claims] == ["skipped"] * 3
    assert _kinds(client) == ["grounding", "debate", "debate", "debate"]  # asked once, then skipped
    assert report.prefilter is not None and report.prefilter.note is not None and "no logprobs" in report.prefilter.note


async def test_logprob_prefilter_on_other_tasks_uses_the_claims_evidence() -> None:
    client = _client({"c0": (0.9, 0.2)})
    async with _verifier(client, prefilters=["logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(
            TaskInput("Paris", question="Capital of France?", reference=SOURCES["1"]), task="qa"
        )
    assert report.claims[0].decided_by == "prefilter:logprob"
    redacted = [c for c in client.calls if "[REDACTED]" in c.request.messages[-1].content]
    assert len(redacted) == 1 and "[E1] [REDACTED]" in redacted[0].request.messages[-1].content


async def test_rag_needs_sources() -> None:
    async with _verifier(_client(None), prefilters=["rules"]) as verifier:
        with pytest.raises(ValueError, match="task rag needs the sources"):
            await verifier.verify(TaskInput(ANSWER, reference="just text"), task="rag")


async def test_outside_rag_the_logprob_check_makes_only_calls_that_can_decide() -> None:
    question, evidence = "Capital of France?", SOURCES["1"]
    # Without trust_grounded it cannot decide, and outside RAG there is no report to fill: no call at all.
    client = _client({"c0": (0.9, 0.2)})
    async with _verifier(client, prefilters=["logprob"]) as verifier:
        report = await verifier.verify(TaskInput("Paris", question=question, reference=evidence), task="qa")
    assert _kinds(client) == ["debate"] and "trust_grounded" in report.claims[0].prefilters[0].reason
    assert report.prefilter is not None and report.prefilter.prefilter_calls == 0
    # A first P(yes) of 0.3 caps the confidence at 0.45 < 0.8 whatever the second call says: it is not made.
    client = _client({"c0": (0.3, 0.0)})
    async with _verifier(client, prefilters=["logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(TaskInput("Paris", question=question, reference=evidence), task="qa")
    assert _kinds(client) == ["grounding", "debate"]
    decision = report.claims[0].prefilters[0]
    assert decision.decision == "skipped" and "no second call" in decision.reason and decision.usage.llm_calls == 1
    # No evidence: the confidence of an unsupported claim is capped at 0.7, so nothing is asked.
    client = _client({"c0": (0.99, 0.99)})
    async with _verifier(client, prefilters=["logprob"], trust_grounded=True) as verifier:
        report = await verifier.verify(TaskInput("Paris", question=question), task="qa")
    assert _kinds(client) == ["debate"] and "cannot reach" in report.claims[0].prefilters[0].reason


def test_max_confidence_bounds_every_possible_second_call() -> None:
    from debate.prefilter._grounding import grounding_score, max_confidence

    for p1 in (0.1, 0.4, 0.53, 0.6, 0.71, 0.9, 1.0):
        for cited in (True, False):
            bound = max_confidence(p1, cited)
            assert all(grounding_score(p1, p0 / 20, cited).confidence <= bound + 1e-12 for p0 in range(21))
