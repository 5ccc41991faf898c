"""The cascade's later teams in an estimate (`stop = "cascade:P"`): each team's expected share of the debated claims
and the turns it adds to each, from the calibrations, and so its models' calls, tokens and cost.

The first team leaves a claim undecided with the probability its calibration gives to ending at max_rounds
undecided (debate.engine.governed_outcome's `capped`, under the calibration's own fitted behaviour). A later team's
turns per claim it takes are those of a debate under its own calibration within its `max_rounds`, and it passes on
what that leaves undecided. That reads a continued debate as a fresh one under the later team's calibration: the
expected figures are an approximation, said in the estimate's notes; the high end is every claim escalated through
every team, each to its rounds' limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from debate.calibration import load_calibration
from debate.config import CascadeTeam, VerifierConfig
from debate.engine import MarkovChain, TeamReach, cascade_reach, governed_outcome, governed_paths
from debate.pipeline._prices import Price
from debate.pipeline._range import ZERO, Range
from debate.pipeline._team_cost import ModelEstimate, planned_models, split_by_model, team_prices

__all__ = [
    "CASCADE_NOTE",
    "CascadeShare",
    "cascade_models",
    "cascade_plan",
    "cascade_shares",
    "governed",
    "most_cost",
    "plan_notes",
    "run_models",
]


CASCADE_NOTE = (
    "the cascade's later teams: each team's share of claims is what the earlier team's calibration leaves undecided, "
    "and its turns a debate under its own calibration within its max_rounds (a continued debate read as a fresh "
    "one); the high end escalates every claim through every team"
)
"""Said with every estimate of a cascade run."""


@dataclass(frozen=True)
class CascadeShare:
    """One later team's expected part of a cascade run."""

    team: CascadeTeam
    reach: float
    """The expected share of debated claims it is handed."""
    turns: Range
    """The turns it adds to a claim it is handed (low: none; high: its rounds' limit)."""


def governed(file: str, prior: float | None, chain: MarkovChain, threshold: float, rounds: int) -> tuple[Range, float]:
    """The turns of a debate under the posterior stop of the calibration in `file` (expected under its own fitted
    behaviour: its classes, their shares and its share of factual claims; the least and most any debate can take),
    and P(undecided when its rounds run out)."""
    model = load_calibration(file).model(prior)
    paths = governed_paths(model, chain, threshold=threshold, max_rounds=rounds)
    turns = capped = 0.0
    for label, prior_of in ((True, model.prior), (False, 1 - model.prior)):
        for component, share in zip(model.classes, model.shares[label], strict=True):
            outcome = governed_outcome(paths, component, label=label)
            turns += prior_of * share * outcome.turns
            capped += prior_of * share * outcome.capped
    ends = [float(p.turns) for p in paths]
    return Range(expected=turns, low=min(ends), high=max(ends)), capped


def cascade_plan(config: VerifierConfig, chain: MarkovChain) -> list[TeamReach]:
    """Each team's reach (the run's first) over the claims it may be handed, from the calibration files
    (debate.engine.cascade_reach): a team that cannot decide any is skipped by the run, and so by the estimate."""
    debate = config.debate
    if not debate.cascade or debate.threshold is None or debate.calibration is None:
        return []
    models = [load_calibration(debate.calibration).ends(debate.prior)]
    models += [load_calibration(step.calibration).ends() for step in debate.cascade]
    rounds = [debate.max_rounds]
    for step in debate.cascade:
        rounds.append(rounds[-1] + step.max_rounds)
    return cascade_reach(models, chain, threshold=debate.threshold, rounds=rounds)


def plan_notes(config: VerifierConfig, plan: Sequence[TeamReach]) -> list[str]:
    """What the estimate says about a team that is skipped or never handed a claim."""
    if not plan:
        return []
    names = ["first", *(step.name for step in config.debate.cascade)]
    threshold = config.debate.threshold or 0.5
    return [reach.said(name, threshold) for name, reach in zip(names, plan, strict=True) if not reach.decidable]


def cascade_shares(config: VerifierConfig, chain: MarkovChain, plan: Sequence[TeamReach]) -> list[CascadeShare]:
    """Each later team's expected share of the debated claims and the turns it adds (see the module); a team the
    plan skips adds none and hands on every claim it is given, the run's own team included."""
    debate = config.debate
    if not plan or debate.threshold is None or debate.calibration is None:
        return []
    threshold = debate.threshold
    reach = 1.0
    if plan[0].decidable:
        _, reach = governed(debate.calibration, debate.prior, chain, threshold, debate.max_rounds)
    shares = []
    for step, planned in zip(debate.cascade, plan[1:], strict=True):
        if not planned.decidable:
            shares.append(CascadeShare(team=step, reach=0.0, turns=ZERO))
            continue
        turns, capped = governed(step.calibration, None, chain, threshold, step.max_rounds)
        shares.append(
            CascadeShare(team=step, reach=reach, turns=Range(expected=reach * turns.expected, low=0.0, high=turns.high))
        )
        reach *= capped
    return shares


def team_config(config: VerifierConfig, step: CascadeTeam) -> VerifierConfig:
    """The configuration whose `[model]` and roles are `step`'s, as the run resolves them (CascadeTeam.model_for)."""
    return config.model_copy(update={"model": step.model.over(config.model), "roles": step.roles})


def cascade_models(
    config: VerifierConfig,
    chain: MarkovChain,
    debate_parts: list[Range],
    first_turns: Range,
    shares: list[CascadeShare],
) -> tuple[list[ModelEstimate], list[Range]]:
    """Each later team's models (named `team: model`) with their calls, tokens and cost at their own prices, and
    the later teams' (calls, input, output) together. `debate_parts` are the first team's debate (calls, input,
    output) and `first_turns` its turns per claim: a later team's part is theirs scaled by its turns."""
    models: list[ModelEstimate] = []
    added = [ZERO, ZERO, ZERO]
    embedded = config.model.base_url is None
    for share in shares:
        team = team_config(config, share.team)
        expected = share.turns.expected / first_turns.expected if first_turns.expected else 0.0
        high = share.turns.high / first_turns.high if first_turns.high else 0.0
        parts = [Range(expected=d.expected * expected, low=0.0, high=d.high * high) for d in debate_parts]
        planned = {name: model for name, (model, _) in planned_models(team, chain).items()}
        prices = team_prices(planned, embedded=embedded)
        for model in split_by_model(team, chain, (parts, parts), share.turns.expected, prices, None):
            models.append(model.model_copy(update={"name": f"{share.team.name}: {model.name}"}))
        added = [a + p for a, p in zip(added, parts, strict=True)]
    return models, added


def run_models(
    config: VerifierConfig,
    chain: MarkovChain,
    parts: tuple[list[Range], list[Range]],
    turns: Range,
    prices: Mapping[str, Price | None] | None,
    price: Price | None,
    shares: list[CascadeShare],
    first_skipped: bool = False,
) -> tuple[list[ModelEstimate], list[Range]]:
    """Every model of the run with its part of `parts` (the debate's (calls, input, output), and the whole run's),
    the cascade's later teams' included, and the whole run's (calls, input, output) with theirs. `first_skipped`:
    the run's own team speaks no turn (`parts`' debate is then one turn per claim, what a later team's turns
    scale)."""
    debate, whole = parts
    if first_skipped:
        whole = [w + d.scaled(-1.0) for w, d in zip(whole, debate, strict=True)]
        own = split_by_model(config, chain, ([ZERO, ZERO, ZERO], whole), 0.0, prices, price)
    else:
        own = split_by_model(config, chain, (debate, whole), turns.expected, prices, price)
    later, added = cascade_models(config, chain, debate, turns, shares)
    return own + later, [w + a for w, a in zip(whole, added, strict=True)]


def most_cost(models: Sequence[ModelEstimate]) -> float | None:
    """The high end of the models' cost together (None: a model that may be called has no price)."""
    if any(m.cost_usd is None and m.calls.high > 0 for m in models):
        return None
    return sum(m.cost_usd.high for m in models if m.cost_usd is not None)
