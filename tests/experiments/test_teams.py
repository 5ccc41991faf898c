"""The benchmark's populations held to their results (docs/teams.md, benchmarks/bench_teams.py): with blind spots
independent across two families, a mixed team's verdict that weighs every agent (its posterior's side) is right more
often than either family's alone; with one population behind both endpoints, the mixed team is the same agents and
decides every claim as the single team does."""

from __future__ import annotations

import numpy as np
import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.concurrency import gather_ordered
from debate.engine import load_chain, result_records
from debate.plugins import TaskInput
from debate.types import Report
from experiments.dynamics.simulate import SimulatedAgents, labels_for
from experiments.teams import FAMILIES, ROLES, compositions, team_posterior

pytestmark = pytest.mark.slow  # teams of simulated agents debate 400 claims each

N = 400
CHAIN = load_chain("true-to-skeptic")


async def _run(
    first: str, second: str, roles: dict[str, str], labels: dict[str, bool]
) -> tuple[list[bool], list[bool]]:
    """Each claim's verdict under the paper's rule (the Leader's) and its exact posterior's side."""
    said: dict[tuple[str, str], list[bool]] = {}
    agents = {name: SimulatedAgents(FAMILIES[name], CHAIN, labels, name=name, said=said) for name in (first, second)}
    config = VerifierConfig(debate=DebateConfig(), roles={role: {"model": {}} for role in roles})
    role_clients = {role: agents[name] for role, name in roles.items()}
    exact = team_posterior({role: FAMILIES[roles.get(role, first)] for role in ROLES})
    async with Verifier(config=config, client=agents[first], role_clients=role_clients) as verifier:

        async def one(item: str) -> Report:
            return await verifier.verify(TaskInput("a", question="q", reference="k", id=item))

        reports = await gather_ordered(list(labels), one, limit=16)
    leader, side = [], []
    for report in reports:
        debate = report.claims[0].debate
        assert debate is not None
        p = exact.p_debate(CHAIN, result_records(debate))
        assert p is not None
        leader.append(report.verdict == "factual")
        side.append(p >= 0.5)
    return leader, side


async def test_independent_blind_spots_make_the_mixed_teams_posterior_right_more_often() -> None:
    labels = labels_for(N, 0.5, 7, prefix="t")
    truth = np.array(list(labels.values()))
    mixed = next(c for c in compositions("weak", "twin") if c.name.startswith("mixed"))
    right = {
        "weak": np.array((await _run("weak", "twin", {}, labels))[1]) == truth,
        "twin": np.array((await _run("twin", "weak", {}, labels))[1]) == truth,
        "mixed": np.array((await _run("weak", "twin", mixed.roles, labels))[1]) == truth,
    }
    # Paired over the same claims: the mixed table beats each family alone, by more than the noise of 400 claims.
    for alone in ("weak", "twin"):
        gain = right["mixed"].astype(float) - right[alone]
        assert gain.mean() - 2 * gain.std(ddof=1) / np.sqrt(N) > 0, (alone, gain.mean())


async def test_one_population_behind_both_endpoints_gains_nothing() -> None:
    labels = labels_for(N, 0.5, 8, prefix="s")
    mixed = next(c for c in compositions("weak", "weak-b") if c.name.startswith("mixed"))
    alone = await _run("weak", "weak-b", {}, labels)
    both = await _run("weak", "weak-b", mixed.roles, labels)
    assert both == alone  # the same agents: every claim decided alike, not merely as often right
