"""Prices, usage and cost per model for a team with a model per role (`roles.<role>.model`): a run's cost is the
sum of each model's usage at that model's own price, and an estimate splits the debate's turns among the roles.

Before a run, a model is named as it will be when the endpoint does not tell (its configured name, else `[model]`'s
section name or `roles.<role>`); after a run, as its reports name it (`Report.usage_by_model`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from debate.config import ModelConfig, VerifierConfig
from debate.endpoints import unique_label
from debate.engine import MarkovChain
from debate.pipeline._prices import Price, cost_of, price_for
from debate.pipeline._range import ZERO, Range
from debate.types import Report, TeamPart, Usage, name_of_label

__all__ = [
    "ModelEstimate",
    "planned_models",
    "report_cost",
    "report_models",
    "role_shares",
    "split_by_model",
    "team_cost",
    "team_prices",
]


class ModelEstimate(BaseModel):
    """One model's part of an estimate: the turns of its roles, and with `[model]` every call outside the debate."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The model, as the run will name it when the endpoint does not (its configured name, else its section)."""
    roles: list[str]
    """The debate roles it speaks for."""
    calls: Range
    """Its model calls."""
    input_tokens: Range
    """Its prompt tokens."""
    output_tokens: Range
    """Its completion tokens."""
    price: Price | None
    """Its price, when one is known."""
    cost_usd: Range | None
    """Its cost, when a price is known."""


def planned_models(config: VerifierConfig, chain: MarkovChain) -> dict[str, tuple[ModelConfig, list[str]]]:
    """Before the run: each model of the team by the name it will have, with the roles it speaks for (roles whose
    settings resolve to one model share it; `[model]` first)."""
    default = config.model.model or "model"
    models: dict[str, tuple[ModelConfig, list[str]]] = {default: (config.model, [])}
    for role in chain.spec.all_roles():
        resolved = config.model_for(role)
        name = next((n for n, (c, _) in models.items() if c == resolved), None)
        if name is None:
            name = unique_label(resolved.model or f"roles.{role}", resolved, config.model, set(models))
            models[name] = (resolved, [])
        models[name][1].append(role)
    return models


def team_prices(models: Mapping[str, ModelConfig], *, embedded: bool) -> dict[str, Price | None]:
    """Each model's price: its own configured one, the embedded model's (free: a role on `[model]`'s embedded
    endpoint), or the price table's for its name."""
    default = next(iter(models.values()), None)
    return {
        name: price_for(
            config,
            name=name,
            embedded=embedded and default is not None and config.base_url == default.base_url,
        )
        for name, config in models.items()
    }


def team_cost(usage: Mapping[str, Usage], prices: Mapping[str, Price | None]) -> tuple[float | None, list[str]]:
    """The usage per model at each model's price: the total (None when a model that was used has no price) and
    the models without one."""
    unpriced = [name for name, used in usage.items() if used.llm_calls and prices.get(name) is None]
    if unpriced:
        return None, unpriced
    total = sum(cost_of(used, price) for name, used in usage.items() if (price := prices.get(name)) is not None)
    return total, []


def role_shares(chain: MarkovChain, turns: float) -> dict[str, float]:
    """The expected turns of each role in a debate of `turns` turns: the initial state's speakers once each, the
    rest spread over the roles as the other states' speakers are (each state taken equally often). Exact for the
    paper's chains, whose two states have the same three speakers; an approximation for a chain whose states
    differ, or under a stop that may end a state part-way."""
    spec = chain.spec
    first = list(spec.states[spec.initial])
    shares = dict.fromkeys(spec.all_roles(), 0.0)
    for role in first:
        shares[role] += 1.0
    others = [roles for name, roles in spec.states.items() if name != spec.initial]
    rest = max(0.0, turns - len(first))
    if others:
        per_state = [{role: roles.count(role) / len(roles) for role in roles} for roles in others]
        for weights in per_state:
            for role, weight in weights.items():
                shares[role] += rest * weight / len(per_state)
    return shares


def split_by_model(
    config: VerifierConfig,
    chain: MarkovChain,
    parts: tuple[list[Range], list[Range]],
    turns: float,
    prices: Mapping[str, Price | None] | None,
    price: Price | None,
) -> list[ModelEstimate]:
    """Each planned model's calls, input and output tokens and cost: `parts` are the debate's (calls, input, output)
    and the whole run's; each model takes its roles' share of the debate's turns, `[model]` also the rest of the
    run. `prices` by planned name (None: `price` for every model)."""
    debate, whole = parts
    shares = role_shares(chain, turns)
    total_turns = sum(shares.values()) or 1.0
    models = []
    for k, (name, (_, roles)) in enumerate(planned_models(config, chain).items()):
        share = sum(shares[role] for role in roles) / total_turns
        own_parts = [
            d.scaled(share) + ((w + d.scaled(-1.0)) if k == 0 else ZERO) for d, w in zip(debate, whole, strict=True)
        ]
        own = price if prices is None else prices.get(name)
        cost = None if own is None else own_parts[1].scaled(own.input / 1e6) + own_parts[2].scaled(own.output / 1e6)
        models.append(
            ModelEstimate(
                name=name,
                roles=roles,
                calls=own_parts[0],
                input_tokens=own_parts[1],
                output_tokens=own_parts[2],
                price=own,
                cost_usd=cost,
            )
        )
    return models


def report_models(report: Report, config: VerifierConfig) -> dict[str, ModelConfig]:
    """Each model a report's turns name, by that name, as `config` configures it: the run's own team's model of
    the turn's role, or the model the cascade team that spoke it gave its role; `[model]` (every call outside the
    debate) first. A model named by the endpoint alone gets the name it answered with, so it is priced by it."""
    default = config.model if config.model.model else config.model.model_copy(update={"model": report.meta.model})
    models = {report.meta.model: default}
    for claim in report.claims:
        debate = claim.debate
        if debate is None:
            continue
        position = 0
        for state in debate.states:
            for turn in state.turns:
                model = _turn_model(config, debate.teams, position, turn.role)
                position += 1
                label = turn.call.model
                if label is None or label in models:
                    continue
                if model.model is None:
                    # The label is the resolved name, made unique in the run: the name is what precedes that.
                    model = model.model_copy(update={"model": name_of_label(label)})
                models[label] = model
    return models


def report_cost(report: Report, config: VerifierConfig) -> float | None:
    """What one report cost: its usage per model (Report.usage_by_model) at each model's price (team_prices on
    `report_models`), the same computation as the run's usage line. None when a model that was used has no
    price."""
    prices = team_prices(report_models(report, config), embedded=report.meta.embedded)
    return team_cost(report.usage_by_model(), prices)[0]


def _turn_model(config: VerifierConfig, teams: Sequence[TeamPart], position: int, role: str) -> ModelConfig:
    team = next((t for t in reversed(teams) if t.first_turn <= position), None)
    if team is None or team.name not in {c.name for c in config.debate.cascade}:
        return config.model_for(role)
    step = next(c for c in config.debate.cascade if c.name == team.name)
    return step.model_for(role, config.model)
