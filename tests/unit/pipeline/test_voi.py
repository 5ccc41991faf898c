"""The voi stop (`stop = "voi:P"`): each turn goes to the team whose next turns are expected to lower the decision's
error most per dollar, under its fitted calibration. Each choice is recomputed here by brute force from the saved
files' rates (one class, each role at one rate whatever it is shown), not by the engine's enumeration."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import load_calibration
from debate.engine import load_chain, result_records
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from debate.types import ClaimVerdict, DebateResult, TurnChoice
from tests.support.calibration import calibration
from tests.support.helpers import op
from tests.unit.engine.test_posterior import _debate

ITEM = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")
CHAIN = load_chain("true-to-skeptic")
Rates = dict[str, tuple[float, float]]
WEAK = {role: (0.65, 0.35) for role in ("initial", "trust", "skeptic", "leader")}
STRONG = {role: (0.95, 0.08) for role in ("initial", "trust", "skeptic", "leader")}
PRICE = {"weak": 1.0, "strong": 10.0}
TOKENS = (1000, 100)


def _file(tmp_path: Path, name: str, rates: dict[str, tuple[float, float]]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(calibration(model=name, rates=rates).model_dump_json())
    return str(path)


def _config(tmp_path: Path, threshold: float, *, strong: bool = True) -> VerifierConfig:
    cascade = []
    if strong:
        model = {"model": "strong", "price_in": PRICE["strong"], "price_out": PRICE["strong"]}
        cascade = [
            {"name": "strong", "model": model, "calibration": _file(tmp_path, "strong", STRONG), "max_rounds": 1}
        ]
    debate = DebateConfig(
        min_rounds=1,
        max_rounds=1,
        calibration=_file(tmp_path, "weak", WEAK),
        stop=f"voi:{threshold}",
        cascade=cascade,
    )
    return VerifierConfig(model={"model": "weak", "price_in": 1.0, "price_out": 1.0}, debate=debate)


def _client(name: str, verdicts: list[bool]) -> ScriptedChatClient:
    return ScriptedChatClient(
        {"debate": [op(v) for v in verdicts]}, model=name, prompt_tokens=TOKENS[0], completion_tokens=TOKENS[1]
    )


def _p(p0: float, rates: dict[str, tuple[float, float]], turns: list[tuple[str, bool]]) -> float:
    odds = math.log(p0 / (1 - p0))
    for role, verdict in turns:
        yes, no = rates[role]
        odds += math.log(yes / no) if verdict else math.log((1 - yes) / (1 - no))
    return 1 / (1 + math.exp(-odds))


def _role_after(prefix: tuple[bool, ...]) -> str:
    return _debate(CHAIN, (*prefix, True))[1][-1][0]


def _turns_left(prefix: tuple[bool, ...], rounds: int) -> int:
    return 1 + 3 * rounds - len(prefix)


def _reaches(p0: float, rates: Rates, prefix: tuple[bool, ...], left: int, threshold: float) -> bool:
    for tail in itertools.product((True, False), repeat=left):
        turns: list[tuple[str, bool]] = []
        for i, verdict in enumerate(tail):
            turns.append((_role_after((*prefix, *tail[:i])), verdict))
            p = _p(p0, rates, turns)
            if p >= threshold or p <= 1 - threshold:
                return True
    return False


def _worth(p0: float, rates: Rates, prefix: tuple[bool, ...], left: int, threshold: float, price: float) -> float:
    """The best ratio over 1 to 3 turns ahead: the fall of E[min(p, 1 - p)] per expected dollar, a path ending
    once p passes the threshold."""
    turn_cost = (TOKENS[0] * price + TOKENS[1] * price) / 1e6

    def expect(p: float, said: tuple[bool, ...], steps: int) -> tuple[float, float]:
        if steps == 0 or p >= threshold or p <= 1 - threshold:
            return min(p, 1 - p), 0.0
        role = _role_after((*prefix, *said))
        yes, no = rates[role]
        p_true = p * yes + (1 - p) * no
        error, cost = 0.0, turn_cost
        for verdict, prob in ((True, p_true), (False, 1 - p_true)):
            after = _p(p, rates, [(role, verdict)])
            e, c = expect(after, (*said, verdict), steps - 1)
            error, cost = error + prob * e, cost + prob * c
        return error, cost

    best = -math.inf
    for depth in range(1, min(3, left) + 1):
        error, cost = expect(p0, (), depth)
        best = max(best, (min(p0, 1 - p0) - error) / cost)
    return best


def _check_choices(debate: DebateResult, threshold: float) -> None:
    verdicts = tuple(bool(r.turn.factuality) for r in result_records(debate))
    teams = {"first": (WEAK, PRICE["weak"]), "strong": (STRONG, PRICE["strong"])}
    for choice in debate.choices:
        if choice.team is None:
            continue
        prefix = verdicts[: choice.turn]
        p0 = 0.5 if choice.p_factual is None else choice.p_factual
        left = _turns_left(prefix, 2)
        worth = {
            name: _worth(p0, rates, prefix, left, threshold, price)
            for name, (rates, price) in teams.items()
            if _reaches(p0, rates, prefix, left, threshold)
        }
        assert choice.team == max(worth, key=lambda n: worth[n]), (choice.why, worth)
        assert choice.why.startswith(choice.team)


async def test_each_turn_goes_to_the_team_worth_most_per_dollar(tmp_path: Path) -> None:
    config = _config(tmp_path, 0.97)
    weak, strong = _client("weak", [True] * 7), _client("strong", [True] * 7)
    async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}) as verifier:
        report = await verifier.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None and debate.stop_reason == "posterior"
    _check_choices(debate, 0.97)
    # both teams spoke: the cheap one where it was worth more per dollar, the strong one where one weak turn moves
    # too little (the figures are recomputed above, not taken from here)
    assert {c.team for c in debate.choices} == {"first", "strong"}
    assert [p.name for p in debate.teams] == [c.team for c in _runs(debate.choices)]
    p = report.claims[0].p_factual
    assert p is not None and p >= 0.97 and report.claims[0].factual


def _runs(choices: list[TurnChoice]) -> list[TurnChoice]:
    return [c for i, c in enumerate(choices) if c.team is not None and (i == 0 or choices[i - 1].team != c.team)]


async def _one_team(tmp_path: Path, verdicts: list[bool], stop: str) -> tuple[ClaimVerdict, DebateResult]:
    config = _config(tmp_path, 0.9, strong=False)
    config = config.model_copy(update={"debate": config.debate.model_copy(update={"stop": stop})})
    async with Verifier(config=config, client=_client("weak", verdicts)) as verifier:
        claim = (await verifier.verify(ITEM)).claims[0]
    assert claim.debate is not None
    return claim, claim.debate


async def test_one_team_speaks_every_turn_and_decides_where_the_posterior_stop_does(tmp_path: Path) -> None:
    # four "true"s in a row take the weak team's p_factual from 0.5 past 0.9 (each moves the log-odds by
    # log(0.65 / 0.35)): both stops end at the fourth turn, alike
    verdicts = [True, True, True, True]
    chosen, by_voi = await _one_team(tmp_path, verdicts, "voi:0.9")
    stopped, by_posterior = await _one_team(tmp_path, verdicts, "posterior:0.9")
    assert len(result_records(by_voi)) == len(result_records(by_posterior)) == 4
    assert by_voi.stop_reason == by_posterior.stop_reason == "posterior"
    assert chosen.p_factual == pytest.approx(stopped.p_factual) and chosen.p_factual == pytest.approx(
        _p(0.5, WEAK, [("initial", True)] * 4)
    )
    assert [c.team for c in by_voi.choices] == ["first"] * 4


async def test_one_team_stops_as_soon_as_the_threshold_is_out_of_its_reach(tmp_path: Path) -> None:
    # true, true, false: p_factual 0.65 with one turn of round 1 left, which takes it to 0.775 at most
    verdicts = [True, True, False, True]
    chosen, by_voi = await _one_team(tmp_path, verdicts, "voi:0.9")
    _, by_posterior = await _one_team(tmp_path, verdicts, "posterior:0.9")
    assert len(result_records(by_voi)) == 3 and len(result_records(by_posterior)) == 4
    assert by_voi.stop_reason == "out_of_reach" and by_posterior.stop_reason == "max_rounds"
    last = by_voi.choices[-1]
    assert last.team is None and last.turn == 3 and "at most 0.775 < 0.9" in last.why
    assert chosen.p_factual == pytest.approx(_p(0.5, WEAK, [("initial", True), ("skeptic", True), ("trust", False)]))


async def test_no_team_that_can_reach_stops_the_debate_and_says_why(tmp_path: Path) -> None:
    # at 0.999 the weak team alone never gets there in two rounds; the strong one can from the start, and after a
    # run of its "false" between "true"s, from where it stands, neither can
    config = _config(tmp_path, 0.999)
    weak, strong = _client("weak", [True] * 7), _client("strong", [True, False] * 4)
    async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}) as verifier:
        report = await verifier.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None
    last = debate.choices[-1]
    assert debate.stop_reason in ("out_of_reach", "max_rounds")
    if debate.stop_reason == "out_of_reach":
        assert last.team is None and "first:" in last.why and "strong:" in last.why
    assert "first" not in {c.team for c in debate.choices}  # never paid: it cannot reach 0.999 from anywhere here
    _check_choices(debate, 0.999)


async def test_a_team_whose_fit_did_not_see_the_turn_does_not_speak_it(tmp_path: Path) -> None:
    # the hand-made file of tests/support/calibration saw one context per role (S1, shown [True]): S0's opening
    # turn is not among them, so only the strong team (which saw every context) may open
    config = _config(tmp_path, 0.9)
    unseen = tmp_path / "weak.json"
    unseen.write_text(calibration(model="weak").model_dump_json())
    weak, strong = _client("weak", []), _client("strong", [True] * 7)
    async with Verifier(config=config, client=weak, cascade_clients={"strong": strong}) as verifier:
        report = await verifier.verify(ITEM)
    debate = report.claims[0].debate
    assert debate is not None and debate.choices[0].team == "strong"
    assert "first: its calibration did not see the initial in S0 shown []" in debate.choices[0].why
    assert load_calibration(str(unseen)).fitted_on.model == "weak"


def _rule_turns(threshold: float, rounds: int) -> float:
    """Expected turns per claim of one weak team under the voi rule, by every verdict sequence: a claim is factual
    with 0.5; a debate ends once p passes the threshold, once no continuation can, or at the round limit."""
    total, longest, seen = 0.0, 1 + 3 * rounds, set()
    for verdicts in itertools.product((True, False), repeat=longest):
        turns, n = list[tuple[str, bool]](), 0
        for n in range(longest + 1):
            p = _p(0.5, WEAK, turns)
            if p >= threshold or p <= 1 - threshold:
                break
            if n == longest or not _reaches(p, WEAK, verdicts[:n], longest - n, threshold):
                break
            turns.append((_role_after(verdicts[:n]), verdicts[n]))
        if verdicts[:n] in seen:
            continue
        seen.add(verdicts[:n])
        for label in (True, False):
            prob = 0.5 * math.prod(
                (WEAK[r][0 if label else 1] if v else 1 - WEAK[r][0 if label else 1]) for r, v in turns
            )
            total += prob * n
    return total


def test_the_estimate_follows_the_stops_rule_over_every_verdict(tmp_path: Path) -> None:
    from debate.pipeline._voi_cost import voi_turns

    config = _config(tmp_path, 0.9, strong=False).model_copy(
        update={
            "debate": DebateConfig(min_rounds=1, max_rounds=2, calibration=str(tmp_path / "weak.json"), stop="voi:0.9")
        }
    )
    found = voi_turns(config, CHAIN)
    assert found.complete and found.teams == ["first"] and found.most == 7
    assert found.turns[0] == pytest.approx(_rule_turns(0.9, 2), rel=1e-9)
    assert 0 < found.undecided < 1


def test_the_estimate_gives_each_team_its_turns_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from debate.cli import main

    weak, strong = _file(tmp_path, "weak", WEAK), _file(tmp_path, "strong", STRONG)
    toml = tmp_path / "voi.toml"
    toml.write_text(
        '[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "weak"\nprice_in = 1.0\nprice_out = 1.0\n'
        f'[debate]\nstop = "voi:0.97"\ncalibration = "{weak}"\nmin_rounds = 1\nmax_rounds = 1\n'
        f'[[debate.cascade]]\nname = "strong"\ncalibration = "{strong}"\nmax_rounds = 1\n'
        '[debate.cascade.model]\nmodel = "strong"\nprice_in = 10.0\nprice_out = 10.0\n'
    )
    item = ["--question", "What is the capital of France?", "--answer", "Paris", "--reference", "Paris is the capital."]
    assert main(["verify", "--config", str(toml), *item, "--estimate", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    models = {m["name"]: m for m in estimate["models"]}
    assert {"first: weak", "strong: strong"} <= set(models)
    assert models["strong: strong"]["price"]["input"] == 10.0 and models["first: weak"]["price"]["input"] == 1.0
    assert models["first: weak"]["calls"]["expected"] > 0 and models["strong: strong"]["calls"]["expected"] > 0
    assert any(n.startswith("voi: expected turns per claim by team (first ") for n in estimate["notes"])
