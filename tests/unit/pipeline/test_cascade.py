"""The cascade stop: a claim the run's team leaves undecided is continued by the next team from the turns so far,
each team's turns read by its own calibration from where the earlier teams left P(factual)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pydantic import ValidationError

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import load_calibration
from debate.engine import SegmentedPosterior, TurnContext, load_chain, result_records
from debate.errors import CalibrationError
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from debate.types import Report
from tests.support.calibration import calibration
from tests.support.helpers import op
from tests.unit.engine.test_posterior import _debate

ITEM = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")


def _files(tmp_path: Path, strong_model: str = "strong") -> tuple[str, str]:
    weak, strong = tmp_path / "weak.json", tmp_path / "strong.json"
    weak.write_text(calibration(model="weak").model_dump_json())
    strong.write_text(calibration(model=strong_model).model_dump_json())
    return str(weak), str(strong)


def _config(tmp_path: Path, *, strong_model: str = "strong", threshold: float = 0.9) -> VerifierConfig:
    weak, strong = _files(tmp_path, strong_model)
    debate = DebateConfig(
        min_rounds=1,
        max_rounds=1,
        calibration=weak,
        stop=f"cascade:{threshold}",
        cascade=[{"name": "strong", "model": {"model": "strong"}, "calibration": strong, "max_rounds": 2}],
    )
    return VerifierConfig(debate=debate)


def _split(weak: list[bool]) -> ScriptedChatClient:
    """The weak team: its turns say `weak` in order (a split team stays undecided)."""
    return ScriptedChatClient({"debate": [op(v) for v in weak]}, model="weak")


def _p(report: Report, tmp_path: Path) -> float | None:
    """P(factual) recomputed from the saved files and the transcript, as the cascade defines it."""
    debate = report.claims[0].debate
    assert debate is not None
    models = [
        load_calibration(str(tmp_path / f"{part.name if part.name != 'first' else 'weak'}.json")).model()
        for part in debate.teams
    ]
    starts = [part.first_turn for part in debate.teams]
    return SegmentedPosterior(models, starts).p_debate(load_chain("true-to-skeptic"), result_records(debate))


async def test_an_undecided_claim_is_continued_by_the_next_team_which_decides_it(tmp_path: Path) -> None:
    weak = _split([True, False, True, False])  # S0 true, then S2: skeptic false, trust true, leader false
    strong = ScriptedChatClient({"debate": [op(True)] * 6}, model="strong")
    async with Verifier(config=_config(tmp_path), client=weak, cascade_clients={"strong": strong}) as verifier:
        report = await verifier.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None
    teams = [(t.name, t.first_turn, t.turns, t.decided) for t in debate.teams]
    assert teams[0] == ("first", 0, 4, False)
    assert teams[1][:2] == ("strong", 4) and teams[1][3] is True
    # The strong team spoke only its own turns, each continuing the chain where the weak team stopped.
    assert len(strong.calls) == teams[1][2] and all(p.startswith("debate:") for p in strong.purposes())
    turns = [t for s in debate.states for t in s.turns]
    assert {t.call.model for t in turns[:4]} == {"weak"} and {t.call.model for t in turns[4:]} == {"strong"}
    assert debate.rounds > 1 and debate.stop_reason == "posterior"
    p = report.claims[0].p_factual
    assert p is not None and p >= 0.9 and p == pytest.approx(_p(report, tmp_path))
    assert debate.teams[0].p_factual is not None and 0.1 < debate.teams[0].p_factual < 0.9
    assert report.claims[0].factual is True
    # Each team's part of the usage, by model.
    assert set(debate.teams[1].usage_by_model) == {"strong"} and debate.teams[1].usage.llm_calls == len(strong.calls)


async def test_a_claim_the_first_team_decides_never_reaches_the_next(tmp_path: Path) -> None:
    weak = ScriptedChatClient({"debate": [op(True)] * 4}, model="weak")
    strong = ScriptedChatClient({"debate": []}, model="strong")
    async with Verifier(config=_config(tmp_path, threshold=0.6), client=weak, cascade_clients={"strong": strong}) as v:
        report = await v.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None and [t.name for t in debate.teams] == ["first"] and debate.teams[0].decided
    assert strong.calls == []


async def test_the_last_team_undecided_says_so_and_takes_the_posteriors_side(tmp_path: Path) -> None:
    weak = _split([True, False, True, False])
    strong = ScriptedChatClient({"debate": [op(v) for v in [False, True, False] * 4]}, model="strong")
    config = _config(tmp_path, threshold=0.99)
    async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}) as verifier:
        report = await verifier.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None
    assert [(t.name, t.decided) for t in debate.teams] == [("first", False), ("strong", False)]
    assert debate.stop_reason == "max_rounds" and debate.rounds == 3
    # after two turns the weak team's remaining two cannot take p_factual past 0.99 either way: it hands over
    first, later = debate.teams
    assert first.turns == 2 and first.out_of_reach is not None and "< 0.99" in first.out_of_reach
    assert later.turns == 8 and later.out_of_reach is None
    # checked by every verdict the weak team could still give, its file read again: from two turns none passes
    # 0.99 or 0.01 by the end of round 1; from one turn, some would have
    model, chain = load_calibration(str(tmp_path / "weak.json")).model(), load_chain("true-to-skeptic")
    said = tuple(bool(r.turn.factuality) for r in result_records(debate)[:2])

    def passes(prefix: tuple[bool, ...]) -> bool:
        for tail in itertools.product((True, False), repeat=4 - len(prefix)):
            contexts = [TurnContext(*c) for c in _debate(chain, (*prefix, *tail))[1]]
            for n in range(len(prefix) + 1, 5):
                p = model.p_factual(contexts[:n])
                if p is not None and (p >= 0.99 or p <= 0.01):
                    return True
        return False

    assert not passes(said) and passes(said[:1])
    p = report.claims[0].p_factual
    assert p is not None and 0.01 < p < 0.99 and report.claims[0].factual == (p >= 0.5)


async def test_a_cascade_teams_calibration_of_another_team_is_refused(tmp_path: Path) -> None:
    weak = _split([])
    strong = ScriptedChatClient({"debate": []}, model="strong")
    config = _config(tmp_path, strong_model="other")
    with pytest.raises(CalibrationError, match=r"strong\.json was fitted on model 'other'; this run uses 'strong'"):
        async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}):
            pass


def test_the_cascade_stop_and_its_teams_are_named_together() -> None:
    with pytest.raises(ValidationError, match=r"needs the teams it escalates to"):
        DebateConfig(calibration="a.json", stop="cascade:0.9")
    with pytest.raises(ValidationError, match="used by the cascade and voi stops only"):
        DebateConfig(calibration="a.json", stop="posterior:0.9", cascade=[{"name": "s", "calibration": "b.json"}])
    with pytest.raises(ValidationError, match="must differ"):
        DebateConfig(calibration="a.json", stop="cascade:0.9", cascade=[{"name": "first", "calibration": "b.json"}])


def _rated(tmp_path: Path, name: str, right: float) -> str:
    path = tmp_path / f"{name}.json"
    rates = {role: (right, 1 - right) for role in ("initial", "trust", "skeptic", "leader")}
    path.write_text(calibration(model=name, rates=rates).model_dump_json())
    return str(path)


def _skipping(tmp_path: Path) -> VerifierConfig:
    # a "true" from the weak team moves the log-odds by log(0.6 / 0.4) = 0.405: its four turns (S0 and one round)
    # reach 0.835 at most, never 0.9; the strong team's first alone passes it (odds 0.95 / 0.05 = 19)
    debate = DebateConfig(
        min_rounds=1,
        max_rounds=1,
        calibration=_rated(tmp_path, "weak", 0.6),
        stop="cascade:0.9",
        cascade=[{"name": "strong", "model": {"model": "strong"}, "calibration": _rated(tmp_path, "strong", 0.95)}],
    )
    return VerifierConfig(model={"model": "weak"}, debate=debate)


async def test_a_team_that_cannot_reach_the_threshold_is_skipped_and_said_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    weak = ScriptedChatClient({"debate": []}, model="weak")  # any call to it fails the test
    strong = ScriptedChatClient({"debate": [op(True)] * 6}, model="strong")
    with caplog.at_level("WARNING"):
        async with Verifier(config=_skipping(tmp_path), client=weak, cascade_clients={"strong": strong}) as verifier:
            report = await verifier.verify(ITEM)
    assert weak.calls == []
    said = [r.getMessage() for r in caplog.records if "is skipped" in r.getMessage()]
    assert said and "team first is skipped: by round 1 its turns take p_factual only to [0.165, 0.835]" in said[0]
    debate = report.claims[0].debate
    assert debate is not None
    first, later = debate.teams
    assert first.turns == 0 and first.out_of_reach is not None and "< 0.9" in first.out_of_reach
    assert later.turns == 1 and later.decided and debate.stop_reason == "posterior"
    assert report.claims[0].p_factual == pytest.approx(0.95)
    assert report.calibration is not None and "team first stopped or was skipped on 1 claim" in str(
        report.calibration.warning
    )


def test_the_estimate_counts_no_turn_for_a_skipped_team(tmp_path: Path) -> None:
    from debate.engine import load_chain
    from debate.pipeline._cascade_cost import cascade_plan, cascade_shares, plan_notes

    config = _skipping(tmp_path)
    chain = load_chain("true-to-skeptic")
    plan = cascade_plan(config, chain)
    assert [p.decidable for p in plan] == [False, True]
    assert any("team first is skipped" in note for note in plan_notes(config, plan))
    (strong,) = cascade_shares(config, chain, plan)
    assert strong.reach == 1.0 and strong.turns.expected > 0  # every claim goes straight to the strong team
