"""For generated teams (roles on `[model]`'s endpoint and on others, on its model and on others, at other sampling
settings, prices given or from the table, a cascade team or none), every debate turn is priced as its own model,
and the four places a user reads a cost agree with that: the usage line, `--estimate`'s price of each role's model,
the cascade line and `debate ablate teams` (report_cost)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate import Verifier, VerifierConfig
from debate.cli.batch_summary import cascade_line
from debate.cli.cost import cost_line, run_prices
from debate.engine import load_chain
from debate.pipeline import PRICE_TABLE, Price, cost_of, planned_models, report_cost, team_prices
from debate.plugins import TaskInput
from debate.results import BatchSummary, ResultRecord
from debate.testing import ScriptedChatClient
from debate.types import Report, Usage
from tests.support.calibration import calibration
from tests.support.helpers import op
from tests.support.properties import Reached

ITEM = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")
CHAIN = load_chain("true-to-skeptic")
ROLES = CHAIN.spec.all_roles()
HOME, AWAY = "https://home.example/v1", "https://away.example/v1"
SPLIT = {"initial": True, "skeptic": False, "trust": True, "leader": False}
"""Each role's verdict: a team that disagrees with itself leaves the claim undecided for the cascade."""


@dataclass(frozen=True)
class Model:
    """A generated model: where, its name, its temperature, its price (None: the table's or none)."""

    endpoint: str
    name: str
    temperature: float
    price: tuple[float, float] | None


_PRICE = st.none() | st.tuples(st.sampled_from([0.5, 3.0]), st.sampled_from([1.0, 12.0]))
_NAME = st.sampled_from(["gpt-4o", "gpt-4o-mini", "gpt-4.1", "house-model"])


@st.composite
def _team(draw: st.DrawFn) -> tuple[Model, dict[str, dict[str, Any]], Model | None]:
    base = Model(HOME, draw(_NAME), 0.0, draw(_PRICE))
    roles: dict[str, dict[str, Any]] = {}
    for role in draw(st.lists(st.sampled_from(ROLES), unique=True, max_size=4)):
        given: dict[str, Any] = {}
        if draw(st.booleans()):
            # Named: another endpoint's only model is known once it is asked, which an estimate does not.
            given["base_url"], given["model"] = AWAY, draw(_NAME)
        elif draw(st.booleans()):
            given["model"] = draw(_NAME)
        if draw(st.booleans()):
            given["temperature"] = 0.7
        price = draw(_PRICE)
        if price is not None:
            given["price_in"], given["price_out"] = price
        roles[role] = given
    later = Model(AWAY, draw(_NAME), 0.0, draw(_PRICE)) if draw(st.booleans()) else None
    return base, roles, later


def _own(base: Model, given: dict[str, Any]) -> Model:
    """The role's model as the issue states it: a given price is its own model's, else the table's for its name."""
    endpoint, name = given.get("base_url", base.endpoint), given.get("model", base.name)
    price: tuple[float, float] | None = None
    if "price_in" in given:
        price = (given["price_in"], given["price_out"])
    elif endpoint == base.endpoint and name == base.name:
        price = base.price
    return Model(endpoint, name, given.get("temperature", base.temperature), price)


def _price(model: Model) -> Price | None:
    if model.price is not None:
        return Price(input=model.price[0], output=model.price[1], source="given")
    listed = PRICE_TABLE.get(model.name)
    return None if listed is None else Price(input=listed[0], output=listed[1], source="table")


def _config(tmp_path: Path, base: Model, roles: dict[str, dict[str, Any]], later: Model | None) -> VerifierConfig:
    model: dict[str, Any] = {"base_url": base.endpoint, "model": base.name}
    if base.price is not None:
        model["price_in"], model["price_out"] = base.price
    debate: dict[str, Any] = {"min_rounds": 1, "max_rounds": 1}
    if later is not None:
        path = tmp_path / "cal.json"
        path.write_text(calibration(model="fitted").model_dump_json())
        team: dict[str, Any] = {"base_url": later.endpoint, "model": later.name}
        if later.price is not None:
            team["price_in"], team["price_out"] = later.price
        cascade = [{"name": "later", "model": team, "calibration": str(path), "max_rounds": 1}]
        # The fits are someone else's team: forced, as the property is about prices, not p_factual.
        debate |= {"calibration": str(path), "stop": "cascade:0.99", "cascade": cascade, "force_calibration_team": True}
    return VerifierConfig.model_validate(
        {"model": model, "debate": debate, "roles": {r: {"model": g} for r, g in roles.items()}}
    )


def _scripted(name: str, tokens: int, *, agree: bool = False) -> ScriptedChatClient:
    script = {f"debate:{role}": [op(True if agree else SPLIT[role])] * 4 for role in ROLES}
    return ScriptedChatClient(script, model=name, prompt_tokens=tokens, completion_tokens=tokens // 10)


async def _run(config: VerifierConfig, base: Model, roles: dict[str, dict[str, Any]], later: Model | None) -> Any:
    clients = {role: _scripted(_own(base, g).name, 1000 * (k + 2)) for k, (role, g) in enumerate(roles.items())}
    cascade = {"later": _scripted(later.name, 7000, agree=True)} if later is not None else None
    async with Verifier(
        config=config, client=_scripted(base.name, 1000), role_clients=clients, cascade_clients=cascade
    ) as verifier:
        return await verifier.verify(ITEM), run_prices(verifier)


def _turn_cost(report: Report, base: Model, roles: dict[str, dict[str, Any]], later: Model | None) -> float | None:
    """Every turn at its own model's price (the later team's for its turns), the rest at `[model]`'s."""
    debate = report.claims[0].debate
    assert debate is not None
    spent, turns, position = 0.0, Usage(), 0
    start = debate.teams[1].first_turn if len(debate.teams) > 1 else None
    for state in debate.states:
        for turn in state.turns:
            on_later = start is not None and position >= start and later is not None
            model = later if on_later and later is not None else _own(base, roles.get(turn.role, {}))
            position += 1
            price = _price(model)
            if price is None:
                return None
            spent, turns = spent + cost_of(turn.call.usage, price), turns + turn.call.usage
    rest = _price(base)
    left = report.usage.less(turns)
    if rest is None:
        return None if left.llm_calls else spent
    return spent + cost_of(left, rest)


def _dollars(text: str) -> float:
    """The amount a phrase starts with (`$0.0123 ...`): a line rounds to 4 places, so it is read back, not matched."""
    assert text.startswith("$"), text
    return float(text[1:].split()[0].rstrip(",;)"))


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(team=_team())
def test_every_turn_is_priced_as_its_own_model_wherever_a_cost_is_read(
    team: tuple[Model, dict[str, dict[str, Any]], Model | None], tmp_path: Path, reached: Reached
) -> None:
    reached.require(priced=0.3, unpriced=0.05, escalated=0.2)
    base, roles, later = team
    config = _config(tmp_path, base, roles, later)
    report, prices = asyncio.run(_run(config, base, roles, later))
    debate = report.claims[0].debate
    assert debate is not None and (len(debate.teams) > 1) == (later is not None)
    if later is not None:
        reached("escalated")
    expected = _turn_cost(report, base, roles, later)
    # ablate teams
    assert report_cost(report, config) == (None if expected is None else pytest.approx(expected))
    # the usage line
    line = cost_line(report.usage_by_model(), prices)
    if expected is None:
        reached("unpriced")
        assert "no price known" in line, line
        return
    reached("priced")
    assert _dollars(line.split(" tokens, ", 1)[1]) == pytest.approx(expected, abs=6e-5), (line, expected)
    # --estimate: each role's planned model at its own model's price
    planned = planned_models(config, CHAIN)
    planned_prices = team_prices({name: m for name, (m, _) in planned.items()}, embedded=False)
    for name, (_, speaks) in planned.items():
        for role in speaks:
            assert planned_prices[name] == _price(_own(base, roles.get(role, {}))), (role, name)
    # the cascade line: each team's turns at its models' prices
    if later is not None:
        summary = BatchSummary()
        summary.add(ResultRecord(id="q", line=1, result=report))
        said = cascade_line(summary, prices)
        assert said is not None
        for team_part in debate.teams:
            own = sum(cost_of(u, p) for m, u in team_part.usage_by_model.items() if (p := prices[m]) is not None)
            said_for = said.split(f"{team_part.name} {team_part.usage.llm_calls} calls, ", 1)[1]
            assert _dollars(said_for) == pytest.approx(own, abs=6e-5), (said, own)
