"""The calibration file is the fit (issue 72): saved and re-read in a new process, it scores every claim it was
fitted on with the fit's own posterior (to 1e-9), for every population of experiments/dynamics/examples.py and every
kind of log (an eval run folder, a `debate verify --output` log, the desk's audit export; `--db` reads the same lines
as the export, tests/desk/test_desk_calibration.py), labelled, unlabelled and mixed.

The debates are the real engine's against each simulated population (in process), written in each log's own format;
the fit is `debate dynamics fit`'s (read_run, fit_model, calibration_of, written as `--save` writes it)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from debate.calibration import Calibration, load_calibration
from debate.concurrency import run_blocking
from debate.engine import TurnContext, load_chain
from debate.results import PredictionRecord
from debate.types import Report
from experiments.dynamics.calibrate import calibration_of
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.fitted import FittedModel
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.observe import RunObservations
from experiments.dynamics.readers import read_run
from experiments.dynamics.replicate import design_of
from experiments.dynamics.simulate import labels_for, simulated_reports
from experiments.dynamics.simulate_run import write_results_log

pytestmark = pytest.mark.slow  # starts a process (the re-read)

CHAIN, MIN_ROUNDS, MAX_ROUNDS = "true-to-skeptic", 2, 4
N = 120
KINDS = ("eval", "log", "export")
LABELLINGS = ("labelled", "unlabelled", "mixed")


def _plan() -> list[tuple[str, str, str]]:
    """(population, labelling, log kind): every population under every labelling, and every kind under every
    labelling it can hold (an eval run's records always carry their label)."""
    plan = []
    for i, name in enumerate(CALIBRATION_EXAMPLES):
        for labelling in LABELLINGS:
            kinds = KINDS if labelling == "labelled" else KINDS[1:]
            plan.append((name, labelling, kinds[i % len(kinds)]))
    return plan


def _kept(labels: dict[str, bool], labelling: str) -> dict[str, bool | None]:
    if labelling == "labelled":
        return dict(labels)
    keep = set(random.Random(1).sample(list(labels), len(labels) // 3)) if labelling == "mixed" else set()
    return {item: (label if item in keep else None) for item, label in labels.items()}


def _write(kind: str, folder: Path, reports: list[Report], labels: dict[str, bool | None]) -> Path:
    folder.mkdir(parents=True)
    items = list(labels)
    if kind == "eval":
        debate = {"chain": CHAIN, "min_rounds": MIN_ROUNDS, "max_rounds": MAX_ROUNDS}
        config = {"spec": {"benchmark": "simulated", "task": "qa", "method": "mcmad", "verifier": {"debate": debate}}}
        (folder / "config.json").write_text(json.dumps(config))
        lines = [
            PredictionRecord(
                id=item,
                task="qa",
                label_factual=bool(labels[item]),
                pred_factual=report.factual,
                decided_by="debate",
                llm_calls=report.usage.llm_calls,
                report=report.model_dump(mode="json"),
            ).to_json()
            for item, report in zip(items, reports, strict=True)
        ]
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        return folder
    if kind == "log":  # what `debate verify --input batch.jsonl --output log.jsonl` writes
        write_results_log(folder / "log.jsonl", labels, reports)
        return folder / "log.jsonl"
    # the desk's GET /v1/audits/export?format=jsonl, the reviewers' labels on the claims
    lines = []
    for number, (item, report) in enumerate(zip(items, reports, strict=True), 1):
        said = labels[item]
        reviews = [] if said is None else [{"claim_id": report.claims[0].claim_id, "label": _label(said)}]
        row = {"audit_id": number, "request": {"id": item}, "report": report.model_dump(mode="json")}
        lines.append(json.dumps({**row, "reviews": reviews}))
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "export.jsonl"


def _label(factual: bool) -> str:
    return "factual" if factual else "non_factual"


def _turns(run: RunObservations) -> dict[str, list[tuple[str, str, list[bool], bool]]]:
    turns: dict[str, list[tuple[str, str, list[bool], bool]]] = {}
    for o in run.observations:
        turns.setdefault(o.item, []).append((o.role, o.state, list(o.shown), o.verdict))
    return turns


_REREAD = """
import json, sys
from debate.calibration import Calibration, load_calibration
from debate.engine import TurnContext, load_chain
cases = json.load(sys.stdin)
out = {}
for case in cases:
    model = load_calibration(case["file"]).posterior
    out[case["file"]] = {
        item: model.p_factual([TurnContext(r, s, tuple(shown), v) for r, s, shown, v in turns])
        for item, turns in case["turns"].items()
    }
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def reports() -> dict[str, tuple[dict[str, bool], list[Report]]]:
    """Per population, its debates under the engine (one per claim)."""
    out = {}
    for i, (name, population) in enumerate(CALIBRATION_EXAMPLES.items()):
        labels = labels_for(N, 0.5, 10 + i, prefix=f"rt{i}")
        out[name] = (
            labels,
            run_blocking(
                simulated_reports(
                    population, chain=CHAIN, min_rounds=MIN_ROUNDS, max_rounds=MAX_ROUNDS, labels=labels, concurrency=64
                )
            ),
        )
    return out


def _shares_are_the_counts(calibration: Calibration) -> None:
    """The file's class shares are the ones its own stored counts imply: every claim has one initial turn, so the
    initial agent's turns per label and class are the claims' mass there (one set of responsibilities behind both;
    they once came from two, an EM step apart)."""
    initial = {load_chain(calibration.fitted_on.chain).spec.initial}
    names: tuple[tuple[Literal["factual", "hallucinated"], bool], ...] = (("factual", True), ("hallucinated", False))
    for name, label in names:
        mass = [
            sum(c.n for c in k.counts if c.label is label and c.state in initial and not c.shown)
            for k in calibration.classes
        ]
        implied = [m / sum(mass) for m in mass]
        assert calibration.shares[name] == pytest.approx(implied, abs=1e-9), (name, calibration.shares, implied)


def _em_posterior(fitted: FittedModel) -> dict[str, float]:
    """Per claim, P(factual | its turns) at the fit's final E step: the weight of its factual pseudo-item
    (clusters.expand; none: below 1e-9)."""
    ix = fitted.indexed
    factual = {claim: 0.0 for claim in ix.claims}
    for item, c, w in zip(ix.items, ix.claim_of, ix.base, strict=True):
        if item.endswith("#factual"):
            factual[ix.claims[c]] = float(w)
    return factual


def _file_is_the_em(file: Path, fitted: FittedModel, run: RunObservations) -> None:
    """The file's p_factual at the fit's own rates (no smoothing, no correction by labels) is the EM posterior of
    every claim without a label, to 1e-9: its counts, shares and prior all come from EM's final responsibilities."""
    model = load_calibration(file).model(smoothing=0.0, corrected=False)
    em = _em_posterior(fitted)
    for item, turns in _turns(run).items():
        if run.finals[item][0] is None:
            p = model.p_factual([TurnContext(r, s, tuple(shown), v) for r, s, shown, v in turns])
            assert p == pytest.approx(em[item], abs=1e-9), (str(file), item)


def test_the_saved_file_scores_every_fitted_claim_as_the_fit_does(
    reports: dict[str, tuple[dict[str, bool], list[Report]]], tmp_path: Path
) -> None:
    cases, expected, seen, families = [], {}, set(), set()
    for name, labelling, kind in _plan():
        labels, debated = reports[name]
        given = _write(kind, tmp_path / f"{name}-{labelling}-{kind}", debated, _kept(labels, labelling))
        run = read_run(given)
        fitted = fit_model(run.observations, bootstrap=0, designs=[design_of(run)])
        calibration = calibration_of(fitted, [run])
        file = tmp_path / f"{name}-{labelling}-{kind}.json"
        file.write_text(calibration.model_dump_json(indent=2) + "\n")
        turns = _turns(run)
        posterior = fitted.posterior
        expected[str(file)] = {
            item: posterior.p_factual([TurnContext(r, s, tuple(shown), v) for r, s, shown, v in t])
            for item, t in turns.items()
        }
        cases.append({"file": str(file), "turns": turns})
        # the header counts claims, not the pseudo-items an unlabelled claim becomes
        assert calibration.fitted_on.claims == len(run.finals) == len(turns)
        assert calibration.fitted_on.turns == len(run.observations)
        # each unlabelled turn is one turn, split between the labels by its claim's P(label | turns)
        stored = sum(c.n for k in calibration.classes for c in k.counts)
        assert stored == pytest.approx(len(run.observations), rel=1e-9)
        labelled = sum(label is not None for label, _, _ in run.finals.values())
        assert (calibration.labels is None) == (labelled == len(run.finals)), (name, labelling)
        _shares_are_the_counts(calibration)
        _file_is_the_em(file, fitted, run)
        seen.add((kind, labelling))
        families.add(calibration.classes[0].family)
    assert families == {"tables", "pulled"}  # both families go through the file
    assert seen == {(k, lab) for k in KINDS for lab in LABELLINGS} - {("eval", "unlabelled"), ("eval", "mixed")}

    done = subprocess.run(
        [sys.executable, "-c", _REREAD], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    reread = json.loads(done.stdout)
    for name, mine in expected.items():
        theirs = reread[name]
        assert set(theirs) == set(mine)
        for item, p in mine.items():
            assert p is not None and theirs[item] == pytest.approx(p, abs=1e-9), (name, item)
        # and the fit separates the claims: not one p_factual for all (the version 2 files' failure)
        assert len({round(p, 6) for p in mine.values() if p is not None}) > 5, name


def test_a_version_2_file_of_an_unlabelled_fit_is_refused_and_a_labelled_one_reads(tmp_path: Path) -> None:
    from debate.errors import CalibrationError
    from tests.support.calibration import calibration

    labelled = json.loads(calibration().model_dump_json())
    labelled["version"] = 2
    (tmp_path / "v2.json").write_text(json.dumps(labelled))
    assert load_calibration(tmp_path / "v2.json").fitted_on.claims == 100
    latent = {**labelled, "labels": {"claims": 100, "labelled": 0, "orientation": "assumption"}}
    (tmp_path / "v2-latent.json").write_text(json.dumps(latent))
    with pytest.raises(CalibrationError, match=r"a version 2 fit with unlabelled claims.*fit it again"):
        load_calibration(tmp_path / "v2-latent.json")
