"""What a team's remaining turns can do to p_factual (debate.engine.reach_from, cascade_reach), checked against
every verdict sequence the chain allows, followed turn by turn with the posterior read from scratch."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.engine import (
    ChainDriver,
    MarkovChain,
    PosteriorModel,
    RoleTables,
    TurnContext,
    cascade_reach,
    load_chain,
    position_after,
    reach_from,
)
from tests.support.properties import Reached, examples
from tests.unit.engine.test_posterior import CHAINS, _debate, _model


def _contexts(chain: MarkovChain, verdicts: tuple[bool, ...]) -> list[TurnContext]:
    return [TurnContext(*c) for c in _debate(chain, verdicts)[1]]


def _brute(
    model: PosteriorModel, chain: MarkovChain, prefix: tuple[bool, ...], threshold: float, max_rounds: int
) -> tuple[float, float]:
    """The least and most p_factual over every continuation of `prefix` (its own turns read too), each followed
    until it passes the threshold or the state of round `max_rounds` ends."""
    low = high = model.p_factual(_contexts(chain, prefix)) if prefix else model.prior
    assert low is not None and high is not None
    longest = 1 + 3 * max_rounds
    for tail in itertools.product((True, False), repeat=longest - len(prefix)):
        records, contexts = _debate(chain, (*prefix, *tail))
        for i in range(len(prefix), len(records)):
            p = model.p_factual([TurnContext(*c) for c in contexts[: i + 1]])
            assert p is not None
            low, high = min(low, p), max(high, p)
            if p >= threshold or p <= 1 - threshold:
                break
            if records[i].last_in_state and records[i].round >= max_rounds:
                break
    return low, high


@pytest.mark.parametrize("chain_name", CHAINS)
@pytest.mark.parametrize("classes", [1, 2])
def test_the_range_from_the_start_is_every_paths_range(chain_name: str, classes: int) -> None:
    chain = load_chain(chain_name)
    model = _model(classes * 5 + len(chain_name), chain, classes)
    for threshold in (0.8, 0.97):
        got = reach_from(model, chain, position_after(chain, []), [], threshold=threshold, max_rounds=2)
        assert (got.low, got.high) == pytest.approx(_brute(model, chain, (), threshold, 2), rel=1e-9)
        assert got.exhausted


@given(
    seed=st.integers(0, 1000),
    prefix=st.lists(st.booleans(), min_size=1, max_size=5),
    chain_name=st.sampled_from(CHAINS),
    classes=st.integers(1, 2),
)
@settings(
    max_examples=examples(0.3, why="each example follows every continuation of a debate turn by turn"),
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # `reached` counts across the examples
)
def test_the_range_from_mid_debate_is_every_continuations_range(
    seed: int, prefix: list[bool], chain_name: str, classes: int, reached: Reached
) -> None:
    reached.require(undecided=0.5)
    chain = load_chain(chain_name)
    model = _model(seed, chain, classes)
    threshold = 0.995  # rarely passed, so most prefixes are still undecided
    verdicts = tuple(prefix)
    records, _ = _debate(chain, verdicts)
    contexts = _contexts(chain, verdicts)
    now = model.p_factual(contexts)
    assert now is not None
    got = reach_from(model, chain, position_after(chain, records), contexts, threshold=threshold, max_rounds=2)
    if now >= threshold or now <= 1 - threshold:
        reached("decided already")
        assert got.low == got.high == now
        return
    reached("undecided")
    assert (got.low, got.high) == pytest.approx(_brute(model, chain, verdicts, threshold, 2), rel=1e-9)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # `reached` counts across the examples
@given(verdicts=st.lists(st.booleans(), max_size=10), chain_name=st.sampled_from(CHAINS))
def test_the_position_is_where_the_driver_plans_the_next_turn(
    verdicts: list[bool], chain_name: str, reached: Reached
) -> None:
    reached.require(mid_state=0.2, state_start=0.2)
    chain = load_chain(chain_name)
    records, _ = _debate(chain, tuple(verdicts))
    position = position_after(chain, records)
    plan = ChainDriver(chain).next_turn(records)
    assert (position.state, position.round, len(position.seq)) == (plan.state, plan.round, plan.position)
    shown = tuple(p.opinion.factuality for p in plan.previous)
    this = [r for r in records if (r.round, r.state) == (plan.round, plan.state)]
    assert position.seq == tuple(r.turn.factuality for r in this)
    if plan.position == 0 and records:
        reached("state_start")
        assert shown[-1:] == (position.entering,)
    else:
        reached("mid_state")


def _flat(chain: MarkovChain, rate: float) -> PosteriorModel:
    """One class whose every role says the truth with probability `rate` whatever it is shown."""
    counts = [
        ((role, state, label, ()), (rate if label else 1 - rate) * 100, 100.0)
        for state in chain.spec.states
        for role in chain.roles(state)
        for label in (True, False)
    ]
    return PosteriorModel(classes=[RoleTables.from_counts(counts)], shares={True: [1.0], False: [1.0]}, prior=0.5)


def test_a_team_that_cannot_reach_the_threshold_is_found_at_start_and_the_next_is_handed_its_ends() -> None:
    chain = load_chain("true-to-skeptic")
    weak, strong = _flat(chain, 0.6), _flat(chain, 0.9)
    # every weak turn moves the log-odds by log(0.6/0.4): seven turns reach at most 0.94, never 0.97
    most = 1 / (1 + math.exp(-7 * math.log(1.5)))
    weak_alone = reach_from(weak, chain, position_after(chain, []), [], threshold=0.97, max_rounds=2)
    assert weak_alone.high == pytest.approx(most) and not weak_alone.decidable(0.97)
    plan = cascade_reach([weak, strong], chain, threshold=0.97, rounds=[2, 5])
    assert [r.decidable for r in plan] == [False, True]
    assert "is skipped" in plan[0].said("weak", 0.97) and plan[1].handed
    # a strong first team that decides every path leaves nothing to hand on
    sure = _flat(chain, 0.999)
    plan = cascade_reach([sure, strong], chain, threshold=0.9, rounds=[1, 3])
    assert plan[0].decidable and not plan[1].handed and "never handed" in plan[1].said("strong", 0.9)
