"""A calibration for a team never run: the table of docs/teams.md (`debate dynamics fit --team`).

    python benchmarks/bench_compose.py [--n 2000] [--pilot-n 600] [--pairs weak:strong,weak:twin,weak:weak-b]

For each pair of simulated models (experiments/teams.py) behind two endpoints on 127.0.0.1: each model alone debates
a labelled pilot of `--pilot-n` claims (`debate verify --config FILE --input pilot.jsonl --output LOG`), and
`debate dynamics fit FIRST.jsonl SECOND.jsonl --team FIRST,skeptic=SECOND,leader=SECOND --save composed.json`
composes the mixed team's calibration from those two logs. The mixed team then debates `--n` other claims with
`--debate.calibration composed.json` (the path a user takes), and its p_factual is scored against the labels:
expected calibration error over 10 bins, Brier score and accuracy by p_factual's side. The floor beside it is the
mixed team's own calibration, fitted on a pilot of the mixed team itself and read back from its file, on the same
debates.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import bench_teams
import numpy as np

from debate.calibration import Calibration, load_calibration, reliability
from debate.engine import load_chain, result_records
from debate.types import Report
from experiments.dynamics.simulate import labels_for
from experiments.teams import Composition


def scores(p: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """ECE over 10 equal-width bins and Brier score (debate.calibration.reliability), and accuracy by p's side."""
    rel = reliability(list(zip(p.tolist(), (y == 1).tolist(), strict=True)))
    return rel.ece, rel.brier, float(np.mean((p >= 0.5) == (y == 1)))


def pair(
    first: str, second: str, folder: Path, urls: dict[str, str], said: dict[tuple[str, str], list[bool]]
) -> dict[str, object]:
    started = time.perf_counter()
    pilot = bench_teams.claims_file(
        labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot"), folder / "pilot.jsonl"
    )
    test = bench_teams.claims_file(labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"), folder / "test.jsonl")
    mixed = Composition("mixed", first, {"skeptic": second, "leader": second})
    logs = []
    for model in (first, second):
        logs.append(folder / f"pilot-{model}.jsonl")
        bench_teams.run(bench_teams.config_file(Composition(model, model, {}), urls, folder, {}), pilot, logs[-1], said)
    composed = folder / "composed.json"
    team = f"{first},skeptic={second},leader={second}"
    bench_teams.fit_args([*map(str, logs), "--team", team, "--save", str(composed)])
    bench_teams.run(bench_teams.config_file(mixed, urls, folder, {}), pilot, folder / "pilot-mixed.jsonl", said)
    own = bench_teams.fit(folder / "pilot-mixed.jsonl", folder / "own.json")
    records = bench_teams.run(
        bench_teams.config_file(mixed, urls, folder, {}, composed), test, folder / "test-log.jsonl", said
    )
    chain, own_model = load_chain("true-to-skeptic"), load_calibration(own).posterior
    p_composed, p_own, y = [], [], []
    for record in records:
        report = Report.model_validate(record["result"])
        p_composed.append(report.claims[0].p_factual)
        p_own.append(own_model.p_debate(chain, result_records(report.claims[0].debate)))  # type: ignore[arg-type]
        y.append(float(bool(record["label_factual"])))
    calibration = load_calibration(composed)
    test_of = calibration.independence[0] if calibration.independence else None
    return {
        "pair": f"{first} + {second}",
        "classes": " x ".join(str(p.classes) for p in calibration.composed),
        "independence": (
            f"G {test_of.statistic:.1f}, p {test_of.p_value:.2g}: {'rejected' if test_of.rejected else 'held'}"
            if test_of
            else "not tested (a model with one class)"
        ),
        "composed": scores(np.array(p_composed, dtype=float), np.array(y)),
        "own": scores(np.array(p_own, dtype=float), np.array(y)),
        "says": _says(calibration),
        "seconds": time.perf_counter() - started,
    }


def _says(calibration: Calibration) -> str:
    """Calibrated, or which checks failed (the file's lines name them in full)."""
    failed: list[str] = sorted({c.name for c in calibration.checks if c.rejected})
    failed += ["independence"] * any(t.rejected for t in calibration.independence)
    return "calibrated" if calibration.calibrated else f"not calibrated ({', '.join(failed)} rejected)"


def main() -> None:
    pairs = [tuple(p.split(":")) for p in ARGS.pairs.split(",")]
    labels = {
        **labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"),
        **labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot"),
    }
    said: dict[tuple[str, str], list[bool]] = {}
    rows = []
    with bench_teams.serving(labels, said) as urls, tempfile.TemporaryDirectory() as tmp:
        for first, second in pairs:
            folder = Path(tmp) / f"{first}-{second}"
            folder.mkdir()
            rows.append(pair(first, second, folder, urls, said))
    print(
        "| models (initial, trust + skeptic, leader) | classes | independence test | composed: ECE, Brier, accuracy by "
        "side | the team's own fit: ECE, Brier, accuracy by side | the composed file says |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        c, o = row["composed"], row["own"]
        print(
            f"| {row['pair']} | {row['classes']} | {row['independence']} | {c[0]:.3f}, {c[1]:.3f}, {c[2]:.3f} | "  # type: ignore[index]
            f"{o[0]:.3f}, {o[1]:.3f}, {o[2]:.3f} | {row['says']} |"  # type: ignore[index]
        )
    print()
    print(json.dumps({str(r["pair"]): round(float(r["seconds"]), 0) for r in rows}))  # type: ignore[arg-type]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims the mixed team debates with the composed file")
    parser.add_argument("--pilot-n", type=int, default=600, help="labelled claims each pilot debates")
    parser.add_argument("--pairs", default="weak:strong,weak:twin,weak:weak-b", help="FIRST:SECOND, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="which claims")
    ARGS = parser.parse_args()
    bench_teams.ARGS = argparse.Namespace(boot=1000, thresholds="0.9")
    main()
