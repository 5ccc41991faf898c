"""The calibration's whole path through the commands, as a researcher runs it: a labelled run, `dynamics fit --save`,
a run of other items with --calibration (paper's rule) and one governed by --stop posterior:P, then `dynamics predict
--stop`, `dynamics validate` (the governed run against its exact prediction, ECE and Brier) and `debate report`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.dynamics.examples import EXAMPLES
from tests.support.helpers import debate

pytestmark = pytest.mark.slow  # starts processes


def _roles(tmp_path: Path) -> Path:
    population = EXAMPLES["markov"]
    lines = [f"seed = {population.seed}"]
    for role, r in population.roles.items():
        lines += [f"[roles.{role}]", f"factual_true = {r.factual_true}", f"hallucinated_true = {r.hallucinated_true}"]
        lines.append(f"conformity = {r.conformity}")
    path = tmp_path / "roles.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _simulate(tmp_path: Path, name: str, *more: str) -> Path:
    out = tmp_path / name
    done = debate("dynamics", "simulate", "--roles", str(_roles(tmp_path)), "--n", "160", "--out", str(out), *more)
    assert done.returncode == 0, done.stderr
    return out


def test_fit_save_then_a_governed_run_of_other_items_is_predicted_and_scored(tmp_path: Path) -> None:
    fitted = _simulate(tmp_path, "fit")
    cal = tmp_path / "cal.json"
    saved = debate("dynamics", "fit", str(fitted), "--bootstrap", "10", "--save", str(cal))
    assert saved.returncode == 0, saved.stderr
    data = json.loads(cal.read_text())
    assert data["format"] == "markov-debate-calibration" and data["version"] == 4
    assert data["fitted_on"]["model"] == "simulated" and data["fitted_on"]["claims"] == 160
    assert {c["name"] for c in data["checks"]} >= {"markov", "state"}

    paper = _simulate(tmp_path, "paper", "--items-seed", "3", "--calibration", str(cal))
    governed = _simulate(
        tmp_path, "governed", "--items-seed", "3", "--calibration", str(cal), "--stop", "posterior:0.8"
    )
    rows = [json.loads(line) for line in (governed / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["p_factual"] is not None for r in rows)
    reasons = {r["report"]["claims"][0]["debate"]["stop_reason"] for r in rows}
    assert "posterior" in reasons and "consensus" not in reasons
    # the verdict is the posterior's side
    assert all((r["p_factual"] > 0.5) == r["pred_factual"] for r in rows if r["p_factual"] != 0.5)
    # other items than the fitted run's (an item's difficulty class follows its id)
    assert all(
        json.loads(line)["id"].startswith("sim3-") for line in (paper / "results.jsonl").read_text().splitlines()
    )

    predicted = debate(
        "dynamics",
        "predict",
        str(fitted),
        "--stop",
        "posterior:0.8",
        "--bootstrap",
        "10",
        "--out",
        str(tmp_path / "plot"),
    )
    assert predicted.returncode == 0, predicted.stderr
    assert "| true-to-skeptic | posterior:0.8 | - |" in predicted.stdout
    validated = debate("dynamics", "validate", str(fitted), str(paper), str(governed), "--bootstrap", "10")
    assert validated.returncode == 0, validated.stderr
    assert "| governed | true-to-skeptic | posterior:0.8 |" in validated.stdout
    assert (
        "governed: p_factual (recorded by the run) on 160 labelled claims: expected calibration error"
        in validated.stdout
    )
    assert (governed / "dynamics" / "reliability.svg").is_file() and (
        governed / "dynamics" / "reliability.png"
    ).is_file()
    reported = debate("report", str(governed))
    assert reported.returncode == 0, reported.stderr
    assert "expected calibration error" in reported.stdout and "Brier score" in reported.stdout
