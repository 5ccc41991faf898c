"""The voi stop in an estimate (`stop = "voi:P"`): each team's expected turns per claim, found by following the
stop's own rule (debate.engine.TurnPolicy) over every verdict the teams can give, weighted by the calibrations'
fitted behaviour: a claim's label at the run's share of factual claims, each team's class of items drawn by its own
file's shares for that label (the teams' classes independent given the label, the cascade's assumption), each turn
saying "true" at its team's class's rate. Nothing is sampled; a policy tree larger than `MOST_NODES` is followed
that far and the rest counted at the round limit by the priciest team (said in the notes)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from debate.calibration import load_calibration
from debate.config import CascadeTeam, VerifierConfig
from debate.endpoints import RoleModelConfig
from debate.engine import (
    MarkovChain,
    PosteriorModel,
    RoleModel,
    Spoken,
    TeamReach,
    TeamView,
    TurnContext,
    TurnPolicy,
    next_context,
    position_of,
)
from debate.pipeline._cascade_cost import CascadeShare, cascade_plan, cascade_shares, plan_notes
from debate.pipeline._choose import LOOKAHEAD, TURN_TOKENS, voi_limit
from debate.pipeline._prices import Price, price_for
from debate.pipeline._range import ZERO, Range
from debate.types import stop_kind

__all__ = ["MOST_NODES", "TeamsPlan", "VoiTurns", "teams_plan", "voi_notes", "voi_shares", "voi_turns"]

MOST_NODES = 20_000
"""The most decisions an estimate follows."""


@dataclass(frozen=True)
class VoiTurns:
    """What the estimate found."""

    teams: list[str]
    turns: list[float]
    """Each team's expected turns per claim."""
    most: int
    """The most turns a claim can take."""
    undecided: float
    """The share of claims the stop leaves undecided (out of reach, the round limit or an unseen context)."""
    followed: int
    """Decisions followed."""
    complete: bool


def _team_cost(config: VerifierConfig, chain: MarkovChain) -> list[dict[str, Price | None]]:
    embedded = config.model.base_url is None
    teams = []
    for k in range(len(config.debate.cascade) + 1):
        prices = {}
        for role in chain.spec.all_roles():
            model = config.model_for(role) if k == 0 else config.debate.cascade[k - 1].model_for(role, config.model)
            prices[role] = price_for(model, embedded=embedded)
        teams.append(prices)
    return teams


def _policy(config: VerifierConfig, chain: MarkovChain) -> tuple[TurnPolicy, list[PosteriorModel]]:
    debate = config.debate
    assert debate.calibration is not None and debate.threshold is not None
    files = [debate.calibration, *(step.calibration for step in debate.cascade)]
    names = ["first", *(step.name for step in debate.cascade)]
    prices = _team_cost(config, chain)
    priced = all(p is not None for team in prices for p in team.values())
    teams = []
    for k, (name, file) in enumerate(zip(names, files, strict=True)):
        calibration = load_calibration(file)
        per_call = {
            role: (TURN_TOKENS[0] * price.input + TURN_TOKENS[1] * price.output) / 1e6 if priced and price else 1.0
            for role, price in prices[k].items()
        }
        teams.append(
            TeamView(
                name, calibration.ends(debate.prior if k == 0 else None), _priced(per_call, calibration.calls_per_turn)
            )
        )
    points = [load_calibration(f).model(debate.prior if k == 0 else None) for k, f in enumerate(files)]
    return TurnPolicy(teams, chain, debate.threshold, voi_limit(config), LOOKAHEAD, {}), points


def _priced(per_call: dict[str, float], calls: float) -> Callable[[str], float]:
    return lambda role: per_call[role] * calls


def _worlds(points: Sequence[PosteriorModel], prior: float) -> list[tuple[float, bool, tuple[RoleModel, ...]]]:
    """(weight, label, each team's class behaviour) for every label and combination of classes, claims factual at
    `prior`."""
    worlds = []
    for label, p_label in ((True, prior), (False, 1 - prior)):
        for combo in itertools.product(*(range(len(m.classes)) for m in points)):
            weight = p_label * math.prod(m.shares[label][c] for m, c in zip(points, combo, strict=True))
            if weight > 0:
                worlds.append((weight, label, tuple(m.classes[c] for m, c in zip(points, combo, strict=True))))
    return worlds


def voi_turns(config: VerifierConfig, chain: MarkovChain) -> VoiTurns:
    """Each team's expected turns per claim under the voi stop (see the module)."""
    policy, points = _policy(config, chain)
    worlds = _worlds(points, config.debate.prior if config.debate.prior is not None else points[0].prior)
    turns = [0.0] * len(policy.teams)
    most = max(len(chain.roles(s)) for s in chain.spec.states) * policy.limit + len(chain.roles(chain.spec.initial))
    undecided, followed = 0.0, 0
    stack: list[tuple[list[Spoken], list[float]]] = [([], [w for w, _, _ in worlds])]
    while stack:
        spoken, probs = stack.pop()
        mass = math.fsum(probs)
        if followed >= MOST_NODES:
            priciest = max(range(len(turns)), key=lambda k: policy.teams[k].cost(chain.spec.all_roles()[0]))
            turns[priciest] += mass * (most - len(spoken))
            undecided += mass
            continue
        followed += 1
        decision = policy.decide(spoken)
        if decision.team is None:
            undecided += mass if decision.stop != "posterior" else 0.0
            continue
        k = decision.team
        turns[k] += mass
        role, state, shown = next_context(chain, position_of(chain, [c.verdict for _, c in spoken]))
        for verdict in (True, False):
            grown = []
            for p, (_, label, behaviour) in zip(probs, worlds, strict=True):
                rate = behaviour[k].p(role, state, label, shown)
                grown.append(p * (rate if verdict else 1 - rate))
            if math.fsum(grown) > 1e-12:
                stack.append(([*spoken, (k, TurnContext(role, state, shown, verdict))], grown))
    names = [t.name for t in policy.teams]
    return VoiTurns(names, turns, most, undecided, followed, followed < MOST_NODES)


def voi_shares(config: VerifierConfig, found: VoiTurns) -> list[CascadeShare]:
    """Each team's expected turns per claim as a share of the run (the run's own team as a team `first` whose
    models are the run's)."""
    first = CascadeTeam(
        name="first",
        model=RoleModelConfig(),
        roles=config.roles,
        calibration=str(config.debate.calibration),
        max_rounds=max(config.debate.max_rounds, 1),
    )
    teams = [first, *config.debate.cascade]
    return [
        CascadeShare(team=team, reach=1.0, turns=Range(expected=turns, low=0.0, high=float(found.most)))
        for team, turns in zip(teams, found.turns, strict=True)
    ]


def voi_notes(found: VoiTurns) -> list[str]:
    """What an estimate of the voi stop says about how it was reached."""
    by_team = ", ".join(f"{name} {turns:.2f}" for name, turns in zip(found.teams, found.turns, strict=True))
    notes = [
        f"voi: expected turns per claim by team ({by_team}) follow the stop's own rule over every verdict the teams "
        "can give, under the calibrations' fitted behaviour (each team's class of items independent of the others' "
        f"given the label), each turn chosen at {TURN_TOKENS[0]:g} tokens in and {TURN_TOKENS[1]:g} out per call "
        f"(the run prices its turns by its own); {found.undecided:.1%} of claims are left undecided"
    ]
    if not found.complete:
        notes.append(
            f"voi: the stop's rule was followed for {found.followed:,} decisions; the claims past them are counted "
            "at the round limit by the priciest team"
        )
    return notes


@dataclass(frozen=True)
class TeamsPlan:
    """What an estimate takes from the teams of a cascade or voi run (nothing for one team under another stop)."""

    voi: VoiTurns | None
    plan: list[TeamReach]
    """The cascade's reach per team (empty under any other stop)."""

    @property
    def first_skipped(self) -> bool:
        """The run's own team's turns are not the run's debate: the cascade skips it, or voi shares turns out."""
        return self.voi is not None or (bool(self.plan) and not self.plan[0].decidable)

    def notes(self, config: VerifierConfig) -> list[str]:
        return voi_notes(self.voi) if self.voi is not None else plan_notes(config, self.plan)

    def shares(self, config: VerifierConfig, chain: MarkovChain) -> list[CascadeShare]:
        return voi_shares(config, self.voi) if self.voi is not None else cascade_shares(config, chain, self.plan)

    def turns_said(self, turns: Range) -> Range:
        """The turns per claim an estimate shows: every team's under voi, none when the cascade skips the first."""
        if self.voi is not None:
            return Range(expected=sum(self.voi.turns), low=1.0, high=float(self.voi.most))
        return ZERO if self.first_skipped else turns


def teams_plan(config: VerifierConfig, chain: MarkovChain) -> TeamsPlan:
    """The voi stop's turns by team, or the cascade's reach per team."""
    if stop_kind(config.debate.stop) == "voi":
        return TeamsPlan(voi=voi_turns(config, chain), plan=[])
    return TeamsPlan(voi=None, plan=cascade_plan(config, chain))
