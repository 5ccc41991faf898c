"""`--estimate`'s expected debate turns per claim against what the real engine does: agents that keep the verdict
they are shown with probability a (and otherwise say the other one), debated by the real Verifier through
`SimulatedAgents` on 600 claims per setting. The estimate is the chain's exact expectation under that behaviour;
the simulated mean must lie within four standard errors of it, and outside that band once the estimate is off
by one turn (a counted S0 turn dropped, min_rounds read as one more round), so the tolerance can catch an error."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from debate.engine import load_chain
from debate.pipeline._behaviour import assumed_behaviour, debate_turns
from experiments.dynamics.simulate import Population, RoleParameters, labels_for, simulated_reports

pytestmark = pytest.mark.slow  # debates 600 claims per setting through the engine: not for the quick lane

N = 600


def _population(keep: float, chain: str) -> Population:
    """Every role: repeat the last verdict shown with probability 2a - 1, else a fair coin, so it keeps the verdict
    with probability a and says the other with 1 - a; with nothing shown (the initial agent), a fair coin."""
    roles = load_chain(chain).spec.all_roles()
    each = RoleParameters(factual_true=0.5, hallucinated_true=0.5, conformity=2 * keep - 1)
    return Population(roles={role: each for role in roles}, seed=7)


@pytest.mark.parametrize(
    ("chain", "keep", "min_rounds", "max_rounds"),
    [("true-to-skeptic", 0.9, 2, 5), ("true-to-skeptic", 0.7, 1, 4), ("true-to-trust", 0.8, 1, 3)],
)
def test_expected_turns_are_what_the_engine_does(chain: str, keep: float, min_rounds: int, max_rounds: int) -> None:
    estimate = debate_turns(assumed_behaviour(keep), load_chain(chain), min_rounds, max_rounds)
    labels = labels_for(N, 0.5, seed=3)
    reports = asyncio.run(
        simulated_reports(
            _population(keep, chain), chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, labels=labels
        )
    )
    turns = []
    for report in reports:
        debate = report.claims[0].debate
        assert debate is not None
        turns.append(sum(len(state.turns) for state in debate.states))
    mean, error = statistics.fmean(turns), statistics.stdev(turns) / N**0.5
    assert abs(mean - estimate.expected) < 4 * error, (mean, estimate.expected, error)
    assert 4 * error < 1, error  # a one-turn slip would be outside the band
    assert estimate.low <= min(turns) and max(turns) <= estimate.high
