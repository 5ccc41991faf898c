"""From a report to the answer's risk, and from the risk and the policy to the action (markov_debate.guard.decide),
on reports the real engine makes from scripted replies."""

from __future__ import annotations

import copy

import pytest

from debate import DebateConfig, ScriptedChatClient, TaskInput, Verifier, VerifierConfig
from debate.config import PrefilterConfig
from debate.types import Failure, Report
from markov_debate.guard.decide import act, failed, verification
from markov_debate.guard.respond import verified_completion
from markov_debate.guard.settings import RouteSettings
from tests.guard.conftest import BAD_CITATION, GOOD, SOURCES
from tests.support.helpers import op

ANNOTATE = RouteSettings(policy="annotate", debate="inline", on_failure="open", act_at="high")
BLOCK = ANNOTATE.model_copy(update={"policy": "block"})
FLAG_MODERATE = ANNOTATE.model_copy(update={"policy": "flag", "act_at": "moderate"})


async def _report(answer: str, replies: list[bool]) -> Report:
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(prefilters=["rules"]),
        claim_concurrency=1,
    )
    client = ScriptedChatClient({"debate": [op(r) for r in replies]})
    async with Verifier(config=config, client=client) as verifier:
        return await verifier.verify(TaskInput(answer, question="Capital?", reference=SOURCES), task="rag")


async def test_a_factual_answer_is_low_risk_and_passes_every_policy() -> None:
    report = await _report(GOOD, [True, True])
    found = verification(report, request_id="r", chosen=ANNOTATE, block_below=None, sources=2)
    assert not isinstance(found, str) and (found.risk, found.status, found.flagged) == ("low", "verified", [])
    assert act(found, ANNOTATE).action == "annotated" and act(found, BLOCK).action == "passed"


async def test_a_contradicted_claim_and_an_invalid_citation_are_high_risk() -> None:
    report = await _report(BAD_CITATION, [True, False])
    found = verification(report, request_id="r", chosen=BLOCK, block_below=None, sources=2)
    assert not isinstance(found, str) and found.risk == "high"
    assert any("rules:" in r for r in found.reasons) and any("contradicted" in r for r in found.reasons)
    assert act(found, BLOCK).action == "blocked"
    streamed = act(found, BLOCK, stream="pass")
    assert streamed.action == "flagged" and "could not be blocked" in streamed.notes[-1]
    assert act(found, FLAG_MODERATE).action == "flagged"


async def test_a_probability_below_the_bar_is_high_risk() -> None:
    report = (await _report(GOOD, [True, True])).model_copy(update={"p_factual": 0.3})
    found = verification(report, request_id="r", chosen=BLOCK, block_below=0.5, sources=2)
    assert not isinstance(found, str) and found.risk == "high" and "below 0.5" in found.reasons[-1]
    assert found.p_factual == 0.3


async def test_a_failure_that_may_pass_is_no_verdict_and_on_failure_decides() -> None:
    report = await _report(GOOD, [True, True])
    down = Failure(
        kind="model_unavailable", message="nothing answers at http://10.0.0.7:8000/v1", stage="debate", transient=True
    )
    claims = [report.claims[0].model_copy(update={"failure": down}), *report.claims[1:]]
    why = verification(
        report.model_copy(update={"claims": claims}), request_id="r", chosen=BLOCK, block_below=None, sources=2
    )
    assert why == "debate: the judge is not reachable"  # the caller reads no address of the guard's judge
    assert failed(why, request_id="r", chosen=BLOCK, sources=2).action == "passed-unverified"
    closed = BLOCK.model_copy(update={"on_failure": "closed"})
    refused = failed(why, request_id="r", chosen=closed, sources=2)
    assert (refused.action, refused.status, refused.risk) == ("refused", "unverified", None)


@pytest.mark.parametrize("policy", ["annotate", "flag", "block"])
async def test_an_unverified_answer_keeps_its_failure_action(policy: str) -> None:
    chosen = ANNOTATE.model_copy(update={"policy": policy})
    found = failed("x", request_id="r", chosen=chosen, sources=0)
    assert act(found, chosen).action == "passed-unverified"


async def test_a_blocked_choice_is_replaced_in_the_response_and_the_upstreams_completion_is_left_as_it_came() -> None:
    report = await _report(BAD_CITATION, [True, False])
    found = verification(report, request_id="r", chosen=BLOCK, block_below=None, sources=2)
    assert not isinstance(found, str)
    blocked, passed = act(found, BLOCK), act(found, ANNOTATE)
    message = {"role": "assistant", "content": BAD_CITATION, "extra": {"nested": [1]}}
    choices = [{"index": n, "message": dict(message), "finish_reason": "stop"} for n in range(2)]
    completion = {"id": "c", "object": "chat.completion", "choices": choices, "usage": {"total_tokens": 3}}
    before = copy.deepcopy(completion)
    out = verified_completion(completion, [blocked, passed], "Withheld: {reasons}")
    assert completion == before
    first, second = out["choices"]
    assert first["finish_reason"] == "content_filter" and first["message"]["content"].startswith("Withheld: ")
    assert second["message"] == message and second["verification"]["action"] == "annotated"
    assert out["verification"]["action"] == "blocked" and out["usage"] == {"total_tokens": 3}
