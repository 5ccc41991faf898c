"""`debate dynamics fit --team`: a team's calibration composed from each model's turns in logs of other teams. On
two families with independent blind spots it reads a mixed team's debates as the exact posterior of that team does;
on one population behind two names, its test of independence fails and the file says p_factual is not calibrated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import load_calibration
from debate.cli import main
from debate.concurrency import gather_ordered
from debate.engine import load_chain, result_records
from debate.plugins import TaskInput
from debate.types import Report
from experiments.dynamics.simulate import SimulatedAgents, labels_for
from experiments.dynamics.simulate_run import write_results_log
from experiments.teams import FAMILIES, ROLES, team_posterior

CHAIN = load_chain("true-to-skeptic")
MIXED = {"skeptic": "second", "leader": "second"}


async def _log(path: Path, first: str, second: str, roles: dict[str, str], labels: dict[str, bool]) -> list[Report]:
    """The team (`roles` on `second`, the rest on `first`) debates `labels`' claims in process; its results log."""
    said: dict[tuple[str, str], list[bool]] = {}
    agents = {name: SimulatedAgents(FAMILIES[name], CHAIN, labels, name=name, said=said) for name in (first, second)}
    config = VerifierConfig(debate=DebateConfig(), roles={role: {"model": {}} for role in roles})
    async with Verifier(config=config, client=agents[first], role_clients={r: agents[second] for r in roles}) as v:

        async def one(item: str) -> Report:
            return await v.verify(TaskInput("a", question="q", reference="k", id=item))

        reports = await gather_ordered(list(labels), one, limit=16)
    write_results_log(path, labels, reports)
    return reports


async def _compose(tmp_path: Path, first: str, second: str, *, mixed: bool) -> Path:
    """On one pilot, logs of the first model alone and of the second alone (or of the mixed team, `mixed`), and the
    mixed team's calibration composed from them."""
    pilot = labels_for(200, 0.5, 3, prefix="pilot")
    logs = [tmp_path / f"{name}.jsonl" for name in ("first", "second")]
    await _log(logs[0], first, second, {}, pilot)
    if mixed:
        await _log(logs[1], first, second, dict.fromkeys(MIXED, second), pilot)
    else:
        await _log(logs[1], second, first, {}, pilot)
    saved = tmp_path / "team.json"
    team = f"{first},skeptic={second},leader={second}"
    code = main(["dynamics", "fit", *map(str, logs), "--team", team, "--save", str(saved), "--bootstrap", "20"])
    assert code == 0
    return saved


@pytest.mark.slow  # three teams of simulated agents debate 200 claims each, and a fit
async def test_a_composed_team_reads_a_mixed_debate_as_its_exact_posterior(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = await _compose(tmp_path, "weak", "strong", mixed=False)  # a team never run
    out = capsys.readouterr().out
    assert "| weak | initial, trust |" in out and "| strong | skeptic, leader |" in out
    calibration = load_calibration(saved)
    assert calibration.version == 5 and [p.model for p in calibration.composed] == ["weak", "strong"]
    assert calibration.fitted_on.model == "weak" and calibration.fitted_on.roles == {
        "skeptic": "strong",
        "leader": "strong",
    }
    assert not any(t.rejected for t in calibration.independence) and calibration.calibrated
    assert "p_factual takes their errors as independent given the label" in str(calibration.warning())
    # New claims, debated by the mixed team: the composed posterior against the team's exact one.
    test = labels_for(200, 0.5, 4, prefix="test")
    reports = await _log(tmp_path / "test.jsonl", "weak", "strong", dict.fromkeys(MIXED, "strong"), test)
    exact = team_posterior({role: FAMILIES["strong" if role in MIXED else "weak"] for role in ROLES})
    composed, truth = [], []
    for report, label in zip(reports, test.values(), strict=True):
        records = result_records(report.claims[0].debate)  # type: ignore[arg-type]
        composed.append((calibration.posterior.p_debate(CHAIN, records), exact.p_debate(CHAIN, records)))
        truth.append(label)
    p = np.array(composed, dtype=float)
    assert np.mean((p[:, 0] >= 0.5) == (p[:, 1] >= 0.5)) >= 0.97
    # Its log loss is within a tenth of a nat per claim of the exact posterior's.
    y = np.array(truth, dtype=float)
    loss = [-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)) for q in np.clip(p.T, 1e-6, 1 - 1e-6)]
    assert loss[0] - loss[1] < 0.1, loss


@pytest.mark.slow  # two teams of simulated agents debate 200 claims each, and a fit
async def test_one_population_behind_two_names_fails_the_independence_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = await _compose(tmp_path, "weak", "weak-b", mixed=True)
    calibration = load_calibration(saved)
    assert [t.rejected for t in calibration.independence] == [True]
    assert not calibration.calibrated
    assert "the item classes of weak and weak-b are associated" in str(calibration.warning())
    assert "independence of weak and weak-b | yes" in capsys.readouterr().out


async def test_a_role_never_seen_on_its_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = labels_for(40, 0.5, 5, prefix="few")
    await _log(tmp_path / "weak.jsonl", "weak", "strong", {}, labels)
    await _log(tmp_path / "mixed.jsonl", "weak", "strong", {"leader": "strong"}, labels)
    code = main(
        [
            "dynamics",
            "fit",
            str(tmp_path / "weak.jsonl"),
            str(tmp_path / "mixed.jsonl"),
            "--team",
            "weak,skeptic=strong",
        ]
    )
    assert code == 2
    assert "no input has the skeptic on model 'strong' (the inputs have it on weak)" in capsys.readouterr().err


async def test_a_composition_needs_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = labels_for(40, 0.5, 6, prefix="few")
    await _log(tmp_path / "mixed.jsonl", "weak", "strong", {"leader": "strong"}, labels)
    lines = (tmp_path / "mixed.jsonl").read_text().splitlines()
    unlabelled = [json.loads(line) for line in lines]
    for record in unlabelled[:5]:
        record.pop("label_factual")
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in unlabelled))
    code = main(["dynamics", "fit", str(tmp_path / "mixed.jsonl"), "--team", "weak,leader=strong"])
    assert code == 2
    assert "5 claim(s) without a label; --team composes labelled fits" in capsys.readouterr().err


def test_simulate_puts_a_role_on_another_simulated_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weak, strong = tmp_path / "weak.toml", tmp_path / "strong.toml"
    weak.write_text('seed = 7\nclass_seed = "weak"\n')
    strong.write_text(
        'seed = 7\nclass_seed = "strong"\nroles.leader = {factual_true = 0.99, hallucinated_true = 0.01}\n'
    )
    out = tmp_path / "team"
    args = ["dynamics", "simulate", "--roles", str(weak), "--model", "weak", "--n", "20", "--out", str(out)]
    assert main([*args, "--role", f"leader=strong:{strong}"]) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    meta = records[0]["report"]["meta"]
    assert (meta["model"], meta["roles"]) == ("weak", {"leader": "strong"})
    turns = [t for r in records for s in r["report"]["claims"][0]["debate"]["states"] for t in s["turns"]]
    assert {t["call"]["model"] for t in turns if t["role"] == "leader"} == {"strong"}
    assert {t["call"]["model"] for t in turns if t["role"] != "leader"} == {"weak"}
    capsys.readouterr()
    for bad, said in [
        ("leader=strong", "give ROLE=NAME:FILE"),
        (f"leader=weak:{strong}", "'weak' is --model's name"),
    ]:
        assert main([*args[:-1], str(tmp_path / "x"), "--role", bad]) == 2
        assert said in capsys.readouterr().err
    twice = ["--role", f"leader=strong:{strong}", "--role", f"skeptic=strong:{weak}"]
    assert main([*args[:-1], str(tmp_path / "y"), *twice]) == 2
    assert "model 'strong' is given another roles file already" in capsys.readouterr().err
