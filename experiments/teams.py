"""Simulated models for teams of two (docs/teams.md, benchmarks/bench_teams.py): populations of agents that stand
for a weaker model, a stronger one 10x its price, and a second family as strong as the weaker one, with the team
compositions the benchmark compares.

A model's blind spots are a class of items on which every one of its agents is fooled (says the wrong verdict most
of the time). Two families with different class seeds are fooled by different items (independent errors); one
population behind both endpoints is fooled by the same ones (shared errors)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from debate.engine import PosteriorModel
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.simulate import ClassView, DifficultyClass, Population, RoleParameters

__all__ = ["FAMILIES", "FOOLED_RIGHT", "PRICES", "ROLES", "Composition", "compositions", "family", "team_posterior"]

ROLES = ("initial", "trust", "skeptic", "leader")
"""The paper's chain's roles."""

PRICES: dict[str, tuple[float, float]] = {
    "weak": (0.15, 0.60),
    "weak-b": (0.15, 0.60),
    "strong": (1.50, 6.00),
    "twin": (0.15, 0.60),
    "alike": (0.15, 0.60),
    "lenient": (0.15, 0.60),
    "weak-memory": (0.15, 0.60),
    "strong-memory": (1.50, 6.00),
}
"""USD per million input and output tokens: the strong model costs 10x the weak one; the twin as the weak."""


FOOLED_RIGHT = 0.5
"""How often an agent is right on an item of its model's blind spots: a coin's chance, every agent of the model
alike (a blind spot is shared by the model's agents, the errors a debate among them cannot correct). A blind spot
where the agents are confidently wrong (right less than half the time) is symmetric between two families and a
mixed table gains little there (docs/teams.md)."""


def family(
    *, right: float, fooled_share: float, class_seed: str, seed: int, conformity: float = 0.0, memory: float = 0.0
) -> Population:
    """Agents right `right` of the time on their own (on factual and hallucinated claims alike), repeating the
    opinion they are shown `conformity` of the time and the one before it `memory` of the time (not Markov), and
    fooled on a `fooled_share` of the items (right FOOLED_RIGHT there)."""
    roles = {
        r: RoleParameters(factual_true=right, hallucinated_true=1 - right, conformity=conformity, memory=memory)
        for r in ROLES
    }
    classes = [
        DifficultyClass(share=fooled_share, factual_true=FOOLED_RIGHT, hallucinated_true=1 - FOOLED_RIGHT),
        DifficultyClass(share=1 - fooled_share),
    ]
    return Population(roles=roles, classes=classes, seed=seed, class_seed=class_seed)


FAMILIES: dict[str, Population] = {
    "weak": family(right=0.85, fooled_share=0.25, class_seed="weak", seed=1),
    "strong": family(right=0.93, fooled_share=0.08, class_seed="strong", seed=2),
    # As the weak model, with blind spots on other items: another family of the same strength.
    "twin": family(right=0.85, fooled_share=0.25, class_seed="twin", seed=3),
}
# The weak population itself behind a second endpoint: one population, the same blind spots.
FAMILIES["weak-b"] = FAMILIES["weak"]
# One model whose items are alike (no blind spots): the population the posterior stop is exact on.
FAMILIES["alike"] = Population(
    roles={r: RoleParameters(factual_true=0.8, hallucinated_true=0.2) for r in ROLES}, seed=4, class_seed="alike"
)
# A lenient judge model (every role leans to "true"), items alike: its turns pin the share of factual claims only
# roughly, so a fit without labels says its file is not calibrated for its base rate.
FAMILIES["lenient"] = CALIBRATION_EXAMPLES["lenient"]
# The weak and strong models with agents that remember the opinion before the one they are shown, 30% of the time:
# no calibration models them, and its checks must say so.
FAMILIES["weak-memory"] = family(right=0.85, fooled_share=0.25, class_seed="weak", seed=5, memory=0.3)
FAMILIES["strong-memory"] = family(right=0.93, fooled_share=0.08, class_seed="strong", seed=6, memory=0.3)
"""The benchmark's models by name."""


@dataclass(frozen=True)
class Composition:
    """A team: the model of `[model]` and each role on another."""

    name: str
    model: str
    roles: dict[str, str]
    cascade: str | None = None
    """The model of a cascade's next team (every role), if this team escalates."""
    threshold: float = 0.9
    """The cascade's posterior threshold (`stop = "cascade:P"`): a team decides a claim once P(factual) or its
    complement reaches it."""


def compositions(first: str, second: str, thresholds: tuple[float, ...] = (0.9,)) -> list[Composition]:
    """The teams of two models the benchmark runs: each alone, the second as Leader only, a mixed table (the Skeptic
    and the Leader on the second), and for a cheaper first model, the cascade from the first to the second at each
    of `thresholds`."""
    mixed = {"skeptic": second, "leader": second}
    teams = [
        Composition(f"all {first}", first, {}),
        Composition(f"all {second}", second, {}),
        Composition(f"{second} as leader", first, {"leader": second}),
        Composition(f"mixed ({first}: initial, trust; {second}: skeptic, leader)", first, mixed),
    ]
    if PRICES[first] < PRICES[second]:
        for threshold in thresholds:
            name = f"cascade {first} -> {second}" + (f" at {threshold:g}" if len(thresholds) > 1 else "")
            teams.append(Composition(name, first, {}, cascade=second, threshold=threshold))
    return teams


@dataclass(frozen=True)
class _TeamClass:
    """One combination of each family's item class: every role decides as its family does on such items."""

    views: dict[str, ClassView]

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        return self.views[role].p(role, state, label, shown)


def team_posterior(families: dict[str, Population], share_true: float = 0.5) -> PosteriorModel:
    """The exact P(factual | turns) of a team whose roles are the populations `families` names (each role's): the
    classes are every combination of the families' item classes, independent between families with different class
    seeds and the same class for families that share one (one population behind two endpoints)."""
    keys = list(dict.fromkeys(p.class_seed for p in families.values()))
    by_key = {p.class_seed: p for p in families.values()}
    combos = list(itertools.product(*(range(max(1, len(by_key[k].classes))) for k in keys)))
    classes, shares = [], []
    for combo in combos:
        index = dict(zip(keys, combo, strict=True))
        views = {
            role: ClassView(population, index[population.class_seed] if population.classes else None)
            for role, population in families.items()
        }
        classes.append(_TeamClass(views))
        share = 1.0
        for key, k in index.items():
            share *= by_key[key].classes[k].share if by_key[key].classes else 1.0
        shares.append(share)
    return PosteriorModel(classes=classes, shares={True: shares, False: shares}, prior=share_true)
