"""The chain as data: built-in specs, spec files, validation at build time, the driver's Table-12 inputs, the
exportable graph, and the autogen termination conditions."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from autogen_agentchat.base import TerminatedException, TerminationCondition

from agents.conditions import AtStateEnd, Consensus, RoundsCompleted, TurnFailed, paper_termination
from agents.team import ChainTurn, TurnMessage
from debate.engine import ChainDriver, ChainError, ChainSpec, MarkovChain, TurnRecord, load_chain
from debate.plugins import CHAINS
from debate.types import CallInfo, Failure, Turn

_CALL = CallInfo(prompt="p", prompt_hash="h", attempts=1)


def _turn(role: str, verdict: bool | None) -> Turn:
    if verdict is None:
        return Turn.failed(role, Failure(kind="reply_unusable", message="bad", stage="debate"), _CALL)
    return Turn(role=role, factuality=verdict, error_severity=0, opinion=f"{role} says {verdict}", call=_CALL)


def test_default_chain_is_the_papers() -> None:
    chain = load_chain("true-to-skeptic")
    assert chain.roles("S0") == ("initial",)
    assert chain.roles("S1") == ("trust", "skeptic", "leader")
    assert chain.roles("S2") == ("skeptic", "trust", "leader")
    for state in ("S0", "S1", "S2"):
        assert chain.next_state(state, True) == "S2"
        assert chain.next_state(state, False) == "S1"
    assert isinstance(chain.graph, nx.MultiDiGraph)
    assert chain.graph.number_of_edges() == 6
    assert set(CHAINS.names()) >= {"true-to-skeptic", "true-to-trust", "always-skeptic", "always-trust"}


@pytest.mark.parametrize(
    ("name", "true_to", "false_to"),
    [("true-to-trust", "S1", "S2"), ("always-skeptic", "S2", "S2"), ("always-trust", "S1", "S1")],
)
def test_paper_transition_rules(name: str, true_to: str, false_to: str) -> None:
    chain = load_chain(name)
    for state in chain.spec.states:
        assert (chain.next_state(state, True), chain.next_state(state, False)) == (true_to, false_to)


def _spec(**overrides: object) -> ChainSpec:
    values: dict[str, object] = {
        "name": "t",
        "states": {"S0": ["initial"], "S1": ["trust", "skeptic", "leader"]},
        "transitions": {"*": {"true": "S1", "false": "S1"}},
    }
    values.update(overrides)
    return ChainSpec.model_validate(values)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"transitions": {"*": {"true": "S0", "false": "S1"}}}, "back to the initial state"),
        ({"states": {"S0": ["initial"], "S1": ["trust", "oracle"]}}, "unknown role 'oracle'"),
        ({"transitions": {"S0": {"true": "S1", "false": "S1"}}}, "state S1 has no transitions"),
        ({"transitions": {"*": {"true": "S1"}}}, "no next state for verdict false"),
        ({"transitions": {"*": {"true": "S1", "false": "S9"}}}, "unknown state 'S9'"),
        (
            {"states": {"S0": ["initial"], "S1": ["trust", "leader"], "S2": ["skeptic", "leader"]}},
            r"\['S2'\] cannot be reached",
        ),
        ({"initial": "S5"}, "initial state 'S5' is not among"),
    ],
)
def test_validation_rejects_bad_chains_with_a_clear_message(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ChainError, match=message):
        MarkovChain(_spec(**overrides))


def test_chain_file_with_a_fourth_role(tmp_path: Path) -> None:
    (tmp_path / "checker.toml").write_text(
        'description = "a fourth role"\nvariables = ["claim", "evidence", "previous"]\n'
        "system = 'You check dates.'\nuser = '$claim $evidence $previous'\n"
    )
    spec = tmp_path / "chain.toml"
    spec.write_text(
        'name = "with-checker"\n'
        '[states]\nS0 = ["initial"]\nS1 = ["trust", "checker", "skeptic", "leader"]\n'
        '[transitions."*"]\ntrue = "S1"\nfalse = "S1"\n'
        '[roles.checker]\nprompt = "checker.toml"\nsees = "previous"\ntitle = "Checker"\n'
    )
    chain = load_chain(str(spec))
    assert chain.roles("S1") == ("trust", "checker", "skeptic", "leader")
    graph = chain.to_dict()
    assert graph["nodes"][1] == {"id": "S1", "roles": ["trust", "checker", "skeptic", "leader"], "initial": False}
    assert {(e["source"], e["target"], e["verdict"]) for e in graph["edges"]} == {
        ("S0", "S1", True),
        ("S0", "S1", False),
        ("S1", "S1", True),
        ("S1", "S1", False),
    }
    json.dumps(graph)  # exportable as is


def test_chain_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nstates = "S0"\n')
    with pytest.raises(ChainError, match=r"bad.toml: states"):
        load_chain(str(bad))
    with pytest.raises(ChainError, match="not valid TOML"):
        (tmp_path / "broken.toml").write_text("name = ")
        load_chain(str(tmp_path / "broken.toml"))
    with pytest.raises(ChainError, match=r"unknown chain 'true-to-skeptik'.*did you mean 'true-to-skeptic'"):
        load_chain("true-to-skeptik")


def test_driver_gives_each_role_its_table_12_inputs() -> None:
    driver = ChainDriver(load_chain("true-to-skeptic"))
    history: list[TurnRecord] = []

    def speak(verdict: bool) -> None:
        plan = driver.next_turn(history)
        history.append(
            TurnRecord(state=plan.state, round=plan.round, position=plan.position, turn=_turn(plan.role, verdict))
        )

    first = driver.next_turn(history)
    assert (first.role, first.state, first.round, first.previous) == ("initial", "S0", 0, [])
    speak(True)  # S0 true -> S2, Skeptic first, shown S0's opinion
    plan = driver.next_turn(history)
    assert (plan.role, plan.state, plan.round) == ("skeptic", "S2", 1)
    assert [p.role for p in plan.previous] == ["initial"]
    speak(False)
    plan = driver.next_turn(history)
    assert plan.role == "trust" and [p.role for p in plan.previous] == ["skeptic"]
    speak(False)
    plan = driver.next_turn(history)
    assert plan.role == "leader" and plan.last_in_state
    assert [(p.role, p.title) for p in plan.previous] == [("skeptic", "Skeptic"), ("trust", "Trust")]
    speak(False)  # the Leader says false -> S1, Trust first, shown the Leader's opinion
    plan = driver.next_turn(history)
    assert (plan.role, plan.state, plan.round) == ("trust", "S1", 2)
    assert [p.role for p in plan.previous] == ["leader"]


def _message(state: str, round_: int, position: int, last: bool, verdict: bool | None) -> TurnMessage:
    content = ChainTurn(state=state, round=round_, position=position, last_in_state=last, turn=_turn("trust", verdict))
    return TurnMessage(content=content, source="trust_agent")


async def test_termination_conditions_compose_per_state() -> None:
    term = paper_termination(min_rounds=2, max_rounds=4)
    assert await term([_message("S0", 0, 0, True, True)]) is None
    for position, verdict in enumerate([True, True, True]):  # round 1 agrees, but min rounds is 2
        assert await term([_message("S2", 1, position, position == 2, verdict)]) is None
    # Round 2 disagrees: "min rounds done" holds but consensus does not, for this state; no stop.
    for position, verdict in enumerate([True, False, True]):
        assert await term([_message("S2", 2, position, position == 2, verdict)]) is None
    for position in range(3):  # round 3 agrees after min rounds: stop
        stop = await term([_message("S2", 3, position, position == 2, False)])
    assert stop is not None and term.terminated


async def test_max_rounds_and_failed_turns_stop() -> None:
    term = AtStateEnd((RoundsCompleted(0) & Consensus()) | RoundsCompleted(1)) | TurnFailed()
    assert await term([_message("S0", 0, 0, True, True)]) is not None  # min rounds 0: S0 is final
    term = paper_termination(min_rounds=2, max_rounds=1)
    assert await term([_message("S0", 0, 0, True, True)]) is None
    assert await term([_message("S1", 1, 0, False, None)]) is not None  # a failed turn stops mid-state


@pytest.mark.parametrize(
    ("condition", "verdict"),
    [(RoundsCompleted(0), True), (Consensus(), True), (TurnFailed(), None), (AtStateEnd(RoundsCompleted(0)), True)],
)
async def test_a_fired_condition_refuses_to_run_again_until_reset(
    condition: TerminationCondition, verdict: bool | None
) -> None:
    """As autogen's own conditions: once fired, a condition raises until it is reset."""
    message = _message("S0", 0, 0, True, verdict)
    assert await condition([message]) is not None and condition.terminated
    with pytest.raises(TerminatedException):
        await condition([message])
    await condition.reset()
    assert condition.terminated is False and await condition([message]) is not None
