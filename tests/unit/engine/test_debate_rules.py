"""The chain's exact semantics, driven through the real autogen agents by a scripted chat client."""

from __future__ import annotations

import asyncio
import json

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.llm import ChatRequest, ModelRequestError, ModelUnavailableError
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient, ScriptExhaustedError
from debate.types import Report
from tests.support.helpers import op


def _verifier(client: ScriptedChatClient, **debate: object) -> Verifier:
    return Verifier(config=VerifierConfig(debate=DebateConfig(**debate)), client=client)


async def _run(client: ScriptedChatClient, **debate: object) -> Report:
    async with _verifier(client, **debate) as verifier:
        return await verifier.verify(
            TaskInput("Lyon", question="What is the capital of France?", reference="Paris is the capital.")
        )


def _system(request: ChatRequest) -> str:
    return request.messages[0].content


def _speaker(request: ChatRequest) -> str:
    """The role that made the call, from the request's declared purpose (never from the prompt's wording)."""
    family, _, role = request.purpose.partition(":")
    assert family == "debate", request.purpose
    return role


def _chain(report: Report) -> list[str]:
    debate = report.claims[0].debate
    assert debate is not None
    return [s.name for s in debate.states]


@pytest.mark.parametrize(
    ("rule", "s0_verdict", "expected_first_state"),
    [
        ("true-to-skeptic", True, "S2"),
        ("true-to-skeptic", False, "S1"),
        ("true-to-trust", True, "S1"),
        ("true-to-trust", False, "S2"),
        ("always-skeptic", True, "S2"),
        ("always-skeptic", False, "S2"),
        ("always-trust", True, "S1"),
        ("always-trust", False, "S1"),
    ],
)
async def test_transition_rule_picks_state_from_previous_verdict(
    rule: str, s0_verdict: bool, expected_first_state: str
) -> None:
    # S0 says s0_verdict; round 1 agrees on the opposite verdict, so round 2's state follows from the Leader's verdict.
    flipped = not s0_verdict
    client = ScriptedChatClient([op(s0_verdict)] + [op(flipped)] * 3 + [op(flipped)] * 3)
    report = await _run(client, chain=rule, min_rounds=2, max_rounds=2)
    order = {"S1": ["trust", "skeptic", "leader"], "S2": ["skeptic", "trust", "leader"]}
    expected_second_state = {
        "true-to-skeptic": {True: "S2", False: "S1"},
        "true-to-trust": {True: "S1", False: "S2"},
        "always-skeptic": {True: "S2", False: "S2"},
        "always-trust": {True: "S1", False: "S1"},
    }[rule][flipped]
    assert _chain(report) == ["S0", expected_first_state, expected_second_state]
    speakers = [_speaker(c.request) for c in client.calls]
    assert speakers == ["initial", *order[expected_first_state], *order[expected_second_state]]
    assert client.remaining == 0


async def test_paper_default_runs_min_rounds_then_stops_on_consensus() -> None:
    client = ScriptedChatClient([op(True)] + [op(True)] * 6)
    report = await _run(client)
    debate = report.claims[0].debate
    assert debate is not None
    assert (debate.rounds, debate.consensus, debate.stop_reason) == (2, True, "consensus")
    assert _chain(report) == ["S0", "S2", "S2"]
    assert report.usage.llm_calls == 7
    assert client.remaining == 0


async def test_consensus_before_min_rounds_does_not_stop() -> None:
    client = ScriptedChatClient([op(False)] + [op(False)] * 9)
    report = await _run(client, min_rounds=3, max_rounds=5)
    debate = report.claims[0].debate
    assert debate is not None and debate.rounds == 3
    assert _chain(report) == ["S0", "S1", "S1", "S1"]


async def test_disagreement_continues_until_consensus_after_min_rounds() -> None:
    # Round 1 and 2 disagree, round 3 agrees -> stop after round 3 even though min_rounds is 2.
    disagree = [op(True), op(False), op(True)]
    client = ScriptedChatClient([op(True), *disagree, *disagree, op(False), op(False), op(False)])
    report = await _run(client, min_rounds=2, max_rounds=5)
    debate = report.claims[0].debate
    assert debate is not None
    assert (debate.rounds, debate.consensus, debate.stop_reason) == (3, True, "consensus")
    # Leader of rounds 1-2 said True -> S2 each time; round 3 comes after a True leader -> S2.
    assert _chain(report) == ["S0", "S2", "S2", "S2"]
    assert report.factual is False


async def test_max_rounds_stops_without_consensus_and_leader_decides() -> None:
    disagree = [op(True, 1), op(False, 4), op(False, 3)]  # leader says False each round
    client = ScriptedChatClient([op(True), *disagree * 3])
    report = await _run(client, min_rounds=1, max_rounds=3)
    claim = report.claims[0]
    assert claim.debate is not None
    assert (claim.debate.rounds, claim.debate.consensus, claim.debate.stop_reason) == (3, False, "max_rounds")
    assert _chain(report) == ["S0", "S2", "S1", "S1"]
    assert (claim.factual, claim.error_severity) == (False, 3)
    assert report.verdict == "non_factual"


async def test_min_rounds_zero_makes_initial_verdict_final() -> None:
    client = ScriptedChatClient([op(False, 4, "wrong city")])
    report = await _run(client, min_rounds=0, max_rounds=5)
    claim = report.claims[0]
    assert claim.debate is not None
    assert (claim.debate.rounds, claim.debate.consensus, claim.debate.stop_reason) == (0, None, "no_debate")
    assert (claim.factual, claim.error_severity, claim.status) == (False, 4, "verified")
    assert len(client.calls) == 1


async def test_final_verdict_is_last_leader_even_against_majority() -> None:
    # Trust and skeptic say True, leader says False: no consensus; at max_rounds the leader's verdict stands.
    client = ScriptedChatClient([op(True), op(True), op(True), op(False, 2)])
    report = await _run(client, min_rounds=1, max_rounds=1)
    claim = report.claims[0]
    assert (claim.factual, claim.error_severity) == (False, 2)
    assert claim.debate is not None and claim.debate.consensus is False


def test_min_rounds_above_max_rounds_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"min_rounds \(3\) must not exceed max_rounds \(2\)"):
        DebateConfig(min_rounds=3, max_rounds=2)


async def test_table12_inputs_chain_between_agents() -> None:
    client = ScriptedChatClient(
        [
            op(False, 4, "S0 says wrong"),
            op(False, 3, "trust agrees"),
            op(True, 0, "skeptic objects"),
            op(False, 4, "leader r1"),
        ]
    )
    await _run(client, min_rounds=1, max_rounds=1)
    s0, trust, skeptic, leader = (c.request.messages[-1].content for c in client.calls)
    assert "previous agent's response" not in s0
    assert (
        "Here is the previous agent's response:\n"
        + json.dumps({"opinion": "S0 says wrong", "factuality": False, "Error severity": 4})
        in trust
    )
    assert "trust agrees" in skeptic and "S0 says wrong" not in skeptic
    assert leader.index("Here is the Trust agent's response:") < leader.index("Here is the Skeptic agent's response:")
    assert "trust agrees" in leader and "skeptic objects" in leader and "S0 says wrong" not in leader
    # Every agent sees exactly one system message, its own, and one user message: no history from other turns.
    for call in client.calls:
        assert [m.role for m in call.request.messages] == ["system", "user"]


async def test_second_round_first_speaker_gets_previous_leader() -> None:
    client = ScriptedChatClient([op(True), op(True), op(False), op(False, 5, "leader one")] + [op(False)] * 3)
    await _run(client, min_rounds=2, max_rounds=2)
    round2_first = client.calls[4].request
    assert _speaker(round2_first) == "trust"  # leader said False -> S1
    assert "leader one" in round2_first.messages[-1].content


async def test_unparseable_reply_is_reasked_with_the_error_then_accepted() -> None:
    client = ScriptedChatClient(["I think it is false.", "{'opinion': 'x', 'factuality': False}", op(False, 4)])
    report = await _run(client, min_rounds=0, max_rounds=0)
    claim = report.claims[0]
    assert claim.status == "verified" and claim.factual is False
    assert claim.debate is not None
    call = claim.debate.states[0].turns[0].call
    assert call.attempts == 3 and len(call.parse_errors) == 2
    assert call.usage.llm_calls == 3
    reask = client.calls[1].request
    # The re-ask continues the same agent's conversation: its bad reply and the parse error are both visible.
    assert [m.role for m in reask.messages] == ["system", "user", "assistant", "user"]
    assert "no JSON object" in reask.messages[-1].content
    assert 'lacks "Error severity"' in client.calls[2].request.messages[-1].content


async def test_persistently_unparseable_reply_makes_claim_unverifiable() -> None:
    client = ScriptedChatClient(
        [op(True), "nonsense", "still nonsense", '{"opinion": "x", "factuality": "maybe", "Error severity": 1}']
    )
    report = await _run(client, min_rounds=1, max_rounds=2, max_parse_retries=2)
    claim = report.claims[0]
    assert claim.status == "unverifiable" and claim.factual is None and claim.error_severity is None
    assert claim.reason is not None and "round 1 skeptic" in claim.reason and "factuality" in claim.reason
    assert report.factual is None and report.verdict == "unverifiable"
    assert claim.debate is not None and claim.debate.stop_reason == "failed"
    failed = claim.debate.states[-1].turns[-1]
    assert failed.error is not None and failed.factuality is None
    assert client.remaining == 0


async def test_unavailable_model_makes_claim_unverifiable_not_false() -> None:
    client = ScriptedChatClient([op(True), ModelUnavailableError("http://x: HTTP 503 after 5 attempts")])
    report = await _run(client)
    claim = report.claims[0]
    assert claim.status == "unverifiable" and claim.factual is None
    assert claim.reason is not None and "503" in claim.reason
    assert report.verdict == "unverifiable"


async def test_fatal_endpoint_error_is_raised_not_hidden() -> None:
    client = ScriptedChatClient([ModelRequestError("HTTP 401: bad key", status=401)])
    with pytest.raises(ModelRequestError, match="401"):
        await _run(client)


async def test_script_running_out_fails_loudly() -> None:
    client = ScriptedChatClient([op(True)])
    with pytest.raises(ScriptExhaustedError):
        await _run(client, min_rounds=1, max_rounds=1)


async def test_interleaved_claims_do_not_share_agent_state() -> None:
    """Two debates run concurrently on one client; each agent sees only its own claim's messages."""

    script = {"debate@paris": [op(True, 0, "about Paris")] * 7, "debate@lyon": [op(False, 0, "about Lyon")] * 7}
    client = ScriptedChatClient(script, delay_s=0.01)
    async with _verifier(client) as verifier:
        paris, lyon = await asyncio.gather(
            verifier.verify(
                TaskInput(
                    "Paris", question="Capital of France?", reference="Paris is the capital of France.", id="paris"
                )
            ),
            verifier.verify(
                TaskInput("Lyon", question="Largest city of the Rhône?", reference="Lyon lies on the Rhône.", id="lyon")
            ),
        )
    assert paris.factual is True and lyon.factual is False and client.remaining == 0
    for call in client.calls:
        user_texts = " ".join(m.content for m in call.request.messages if m.role != "system")
        assert not ("Answer: Paris" in user_texts and "Answer: Lyon" in user_texts)
        assert not ("about Paris" in user_texts and "Answer: Lyon" in user_texts)
        assert not ("about Lyon" in user_texts and "Answer: Paris" in user_texts)
        assert len(call.request.messages) == 2
    # The two debates really interleaved.
    answers = ["Paris" if "Answer: Paris" in c.request.messages[-1].content else "Lyon" for c in client.calls]
    assert answers != sorted(answers) and answers != sorted(answers, reverse=True)


async def test_report_records_config_prompts_and_usage() -> None:
    client = ScriptedChatClient([op(True)] + [op(True)] * 6)
    report = await _run(client)
    meta = report.meta
    assert set(meta.prompts) == {"initial", "trust", "skeptic", "leader", "reask"}
    assert all(len(h) == 64 for h in meta.prompts.values())
    assert meta.config["debate"] == {
        "min_rounds": 2,
        "max_rounds": 5,
        "chain": "true-to-skeptic",
        "max_parse_retries": 2,
        "calibration": None,
        "stop": "consensus",
        "force_calibration": False,
        "cascade": [],
        "force_calibration_team": False,
        "prior": None,
    }
    assert "api_key" not in meta.config["model"]
    turn = report.claims[0].debate.states[1].turns[0]  # type: ignore[union-attr]
    assert turn.call.prompt == "skeptic" and turn.call.prompt_hash == meta.prompts["skeptic"]
    assert report.usage.prompt_tokens == 70 and report.usage.completion_tokens == 35


async def test_reports_of_one_verifier_share_its_record_but_each_has_its_own_time() -> None:
    client = ScriptedChatClient([op(True)] * 14)
    async with _verifier(client) as verifier:
        item = TaskInput("Lyon", question="What is the capital of France?", reference="Paris is the capital.")
        first = await verifier.verify(item)
        second = await verifier.verify(item)
    assert first.meta.created_at < second.meta.created_at
    assert first.meta.model_dump(exclude={"created_at"}) == second.meta.model_dump(exclude={"created_at"})
    assert first.meta.config["debate"]["chain"] == "true-to-skeptic"
