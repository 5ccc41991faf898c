"""One identity of a model (issue 84): a given price is its own model's, a label is never priced, the embedded
model's zero price is its own, half a price is refused, every role named anywhere is checked against the chain, a
calibration compares each role's model by name and sampling settings, and a cascade's report says what every
calibration that read its turns says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from rich.console import Console

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import Calibration
from debate.cli.cost import cost_line, run_prices
from debate.cli.render import render_report
from debate.config import ModelConfig, RoleModelConfig
from debate.engine import load_chain
from debate.errors import CalibrationError, UsageError
from debate.pipeline import Price, planned_models, report_cost, team_prices
from debate.pipeline._escalate import CASCADE_ASSUMPTION
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from debate.types import SAMPLING_FIELDS
from tests.support.calibration import FAILED_MARKOV, calibration
from tests.support.helpers import op

ITEM = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")
CHAIN = load_chain("true-to-skeptic")
ROLES = CHAIN.spec.all_roles()


def _priced(**roles: dict[str, Any]) -> VerifierConfig:
    model = {"base_url": "https://api.example/v1", "model": "gpt-4o", "price_in": 2.5, "price_out": 10}
    return VerifierConfig.model_validate({"model": model, "roles": {r: {"model": m} for r, m in roles.items()}})


def _prices(config: VerifierConfig) -> dict[str, Price | None]:
    planned = {name: model for name, (model, _) in planned_models(config, CHAIN).items()}
    return team_prices(planned, embedded=config.model.base_url is None)


def test_a_price_given_for_model_is_that_models_and_a_label_is_never_priced() -> None:
    prices = _prices(_priced(leader={"model": "gpt-4o-mini"}, skeptic={"temperature": 0.7}))
    # Another model on [model]'s endpoint: the table's price for its own name, not [model]'s given one.
    assert prices["gpt-4o-mini"] == Price(input=0.15, output=0.6, source="table")
    # The same model at another temperature is named apart and keeps its model's price.
    assert prices["gpt-4o[temperature=0.7]"] == Price(input=2.5, output=10, source="given")
    unpriced = VerifierConfig.model_validate(
        {
            "model": {"base_url": "https://api.example/v1", "model": "gpt-4o"},
            "roles": {"skeptic": {"model": {"temperature": 0.7}}},
        }
    )
    assert _prices(unpriced)["gpt-4o[temperature=0.7]"] == Price(input=2.5, output=10, source="table")
    # A role that gives its own price keeps it.
    own = _prices(_priced(leader={"model": "gpt-4o-mini", "price_in": 1, "price_out": 2}))
    assert own["gpt-4o-mini"] == Price(input=1, output=2, source="given")


@pytest.mark.parametrize("given", [{"price_in": 0.15}, {"price_out": 0.6}])
def test_half_a_price_is_refused_for_model_and_for_a_role(given: dict[str, float]) -> None:
    with pytest.raises(ValidationError, match="is given without price_"):
        ModelConfig.model_validate(given)
    with pytest.raises(ValidationError, match="is given without price_"):
        RoleModelConfig.model_validate(given)
    with pytest.raises(ValidationError, match=r"roles\.leader\.model"):
        VerifierConfig.model_validate({"roles": {"leader": {"model": given}}})


async def _team_report(config: VerifierConfig) -> tuple[Any, dict[str, Price | None]]:
    weak = ScriptedChatClient({"debate": [op(True)] * 3}, model="local", prompt_tokens=1000, completion_tokens=100)
    strong = ScriptedChatClient(
        {"debate:leader": [op(True)]}, model="gpt-4o", prompt_tokens=2_000_000, completion_tokens=1000
    )
    async with Verifier(
        config=config, client=weak, role_clients={"leader": strong}, attached_embedded=True
    ) as verifier:
        return await verifier.verify(ITEM), run_prices(verifier)


async def test_the_embedded_models_zero_price_is_its_own_and_both_costs_agree() -> None:
    leader = {"base_url": "http://strong:2/v1", "model": "gpt-4o", "price_in": 2.5, "price_out": 10}
    config = VerifierConfig.model_validate(
        {
            "model": {"base_url": "http://127.0.0.1:5/v1"},
            "debate": {"min_rounds": 1, "max_rounds": 1},
            "roles": {"leader": {"model": leader}},
        }
    )
    report, prices = await _team_report(config)
    assert report.meta.embedded
    # The leader's 2,000,000 input tokens at $2.50 per million and 1,000 output at $10: the embedded rest is free.
    expected = 2.0 * 2.5 + 1000 * 10 / 1e6
    assert report_cost(report, config) == pytest.approx(expected)
    line = cost_line(report.usage_by_model(), prices)
    assert f"${expected:.4f}" in line and "gpt-4o: 1 calls" in line, line
    # The summary a user reads names both models and what each answered, not [model] alone.
    said = f"models: local ({report.usage.llm_calls - 1} calls), gpt-4o (1 calls)"
    assert report.models_said() == said
    console = Console(record=True, width=400)
    render_report(report, console)
    assert f"{said}   calls: {report.usage.llm_calls}" in console.export_text()


def test_a_misspelt_role_under_a_cascade_team_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(calibration(model="weak").model_dump_json())
    debate = DebateConfig(
        calibration=str(path),
        stop="cascade:0.9",
        cascade=[{"name": "strong", "calibration": str(path), "roles": {"skeptc": {"model": {"model": "x"}}}}],
    )
    with pytest.raises(UsageError, match=r"debate\.cascade\.strong\.roles\.skeptc: .*no role 'skeptc'"):
        Verifier(config=VerifierConfig(debate=debate), client=ScriptedChatClient([]))


def _identity(model: str, **settings: Any) -> dict[str, Any]:
    fields = ModelConfig(model=model, **settings).identity().model_dump()
    return {"endpoint": None, "name": model, **{f: fields[f] for f in SAMPLING_FIELDS}}


def _cascade(tmp_path: Path, strong: Calibration, **debate: Any) -> VerifierConfig:
    first, later = tmp_path / "weak.json", tmp_path / "strong.json"
    first.write_text(calibration(model="gpt-4o", team={r: _identity("gpt-4o") for r in ROLES}).model_dump_json())
    later.write_text(strong.model_dump_json())
    team = {"name": "strong", "model": {"temperature": 0.7}, "calibration": str(later), "max_rounds": 2}
    return VerifierConfig(
        model=ModelConfig(model="gpt-4o"),
        debate=DebateConfig(
            min_rounds=1, max_rounds=1, calibration=str(first), stop="cascade:0.9", cascade=[team], **debate
        ),
    )


async def _escalated(config: VerifierConfig) -> Any:
    weak = ScriptedChatClient({"debate": [op(v) for v in [True, False, True, False]]}, model="gpt-4o")
    strong = ScriptedChatClient({"debate": [op(True)] * 6}, model="gpt-4o")
    async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}) as verifier:
        return await verifier.verify(ITEM)


async def test_a_teams_own_fit_is_used_in_a_cascade_and_a_fit_at_other_settings_is_refused(tmp_path: Path) -> None:
    # The strong team's own fit: [model] gpt-4o at temperature 0.7, as its run recorded it.
    own = calibration(model="gpt-4o", team={r: _identity("gpt-4o", temperature=0.7) for r in ROLES})
    report = await _escalated(_cascade(tmp_path, own))
    debate = report.claims[0].debate
    assert debate is not None and [t.name for t in debate.teams] == ["first", "strong"]
    later = {t.call.model for s in debate.states for t in s.turns[:]} - {"gpt-4o"}
    assert later == {"gpt-4o[temperature=0.7]"}  # named apart in the run, one model to its calibration
    assert report.calibration is not None and report.calibration.calibrated
    assert CASCADE_ASSUMPTION in str(report.calibration.warning)

    # A fit at temperature 0 on a team at 0.7: refused, naming the setting; forced, used and said not calibrated.
    cold = calibration(model="gpt-4o", team={r: _identity("gpt-4o") for r in ROLES})
    with pytest.raises(CalibrationError, match=r"was fitted with the initial at temperature 0\.0 \(now 0\.7\)"):
        await _escalated(_cascade(tmp_path, cold))
    forced = await _escalated(_cascade(tmp_path, cold, force_calibration_team=True))
    note = forced.calibration
    assert note is not None and note.calibrated is False
    assert "team strong: not calibrated: it was fitted with the initial at temperature 0.0 (now 0.7)" in str(
        note.warning
    )


async def test_a_later_teams_failed_checks_make_the_report_not_calibrated(tmp_path: Path) -> None:
    failed = calibration(
        model="gpt-4o", team={r: _identity("gpt-4o", temperature=0.7) for r in ROLES}, checks=[FAILED_MARKOV]
    )
    report = await _escalated(_cascade(tmp_path, failed, force_calibration=True))
    note = report.calibration
    assert note is not None and note.calibrated is False
    assert "team strong: p_factual is not calibrated: the markov check fails" in str(note.warning)
    debate = report.claims[0].debate
    assert debate is not None and debate.teams[0].calibrated is True and debate.teams[1].calibrated is False
    from debate.cli.render import team_line

    line = team_line(debate)
    assert "strong's calibration: p_factual is not calibrated" in line
    assert "independent of the earlier's given the label" in line
