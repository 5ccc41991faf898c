"""The calibrated posterior and the posterior stop, measured on simulated populations (the figures of
docs/dynamics.md, "A verdict with its probability").

    python benchmarks/bench_posterior.py [--n 2000] [--populations markov,two-class,...] [--plot DIR]

Per population (experiments/dynamics/examples.py, CALIBRATION_EXAMPLES): a labelled run of `--n` claims under the
paper's rule is fitted and saved as a calibration file (`debate dynamics fit --save`); then on `--n` other claims
(other ids, labels and difficulty classes):
- a run under the paper's rule with --calibration: the consensus verdict's accuracy against the posterior's side
  (p_factual > 0.5), and the expected calibration error (10 bins) and Brier score of p_factual;
- the posterior stop's exact prediction (`debate dynamics predict --stop`) at thresholds P, from the fitted run: the
  threshold chosen is the cheapest whose predicted accuracy reaches the paper rule's predicted accuracy;
- a run governed by `--stop posterior:P` at that threshold: its accuracy and calls against the paper rule's run on
  the same items, and whether predict's intervals hold what it observed (the combined 95% margin of the prediction
  and the run's own sampling error, as `debate dynamics validate` judges it).

Every run goes through the real engine (the Verifier, the autogen team, the stop conditions) with the simulated
agents answering in process.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from debate.calibration import load_calibration
from experiments.dynamics.calibrate import calibration_of, reliability
from experiments.dynamics.commands import agrees, plot_predictions
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.observe import RunObservations
from experiments.dynamics.predict import Predicted, Setting, predict
from experiments.dynamics.readers import read_run
from experiments.dynamics.replicate import design_of
from experiments.dynamics.simulate import Population
from experiments.dynamics.simulate_run import simulate_run

CHAIN, MIN_ROUNDS, MAX_ROUNDS = "true-to-skeptic", 2, 5
THRESHOLDS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99)


def _run(population: Population, out: Path, n: int, items_seed: int | None, **governed: object) -> RunObservations:
    simulate_run(
        population,
        chain=CHAIN,
        min_rounds=MIN_ROUNDS,
        max_rounds=MAX_ROUNDS,
        n=n,
        share_true=0.5,
        out=out,
        items_seed=items_seed,
        governed=dict(governed),
        in_process=True,
    )
    return read_run(out)


def _observed(run: RunObservations) -> tuple[float, float, float]:
    """Accuracy, mean calls and the calls' standard error."""
    finals = list(run.finals.values())
    calls = [c for *_, c in finals]
    return (
        sum(label == v for label, v, _ in finals) / len(finals),
        sum(calls) / len(calls),
        statistics.pstdev(calls) / math.sqrt(len(calls)),
    )


def _holds(p: Predicted, accuracy: float, calls: float, calls_se: float, n: int) -> tuple[bool, bool]:
    accuracy_se = math.sqrt(accuracy * (1 - accuracy) / n)
    return (
        agrees(p.accuracy, p.accuracy_interval, accuracy, accuracy_se),
        agrees(p.calls_per_claim, p.calls_interval, calls, calls_se),
    )


def _population(name: str, population: Population, n: int, folder: Path, plot: Path | None) -> str:
    started = time.perf_counter()
    fitted_run = _run(population, folder / "fit", n, None)
    fitted = fit_model(fitted_run.observations, bootstrap=200, seed=0, designs=[design_of(fitted_run)])
    calibration = calibration_of(fitted, [fitted_run])
    cal = folder / "cal.json"
    cal.write_text(calibration.model_dump_json(indent=2))
    load_calibration(cal)
    paper = _run(population, folder / "paper", n, 1000, calibration=str(cal))
    pairs = [(p, bool(paper.finals[k][0])) for k, p in paper.p_factual.items() if k in paper.finals]
    rel = reliability(pairs)
    consensus, paper_calls, _ = _observed(paper)
    posterior_verdict = sum((p > 0.5) == label for p, label in pairs) / len(pairs)

    settings = [Setting(CHAIN, MIN_ROUNDS, MAX_ROUNDS)] + [
        Setting(CHAIN, MIN_ROUNDS, MAX_ROUNDS, stop=p) for p in THRESHOLDS
    ]
    rows = predict(fitted_run.observations, settings, share_true=0.5, fitted=fitted)
    paper_predicted, stops = rows[0], rows[1:]
    reaching = [r for r in stops if r.accuracy >= paper_predicted.accuracy] or [max(stops, key=lambda r: r.accuracy)]
    chosen = min(reaching, key=lambda r: r.calls_per_claim)
    threshold = float(chosen.stop.partition(":")[2])
    # forced where a check fails: the point is to measure what the stop does there (the ECE column says how wrong)
    governed = _run(
        population,
        folder / "governed",
        n,
        1000,
        calibration=str(cal),
        stop=f"posterior:{threshold}",
        force_calibration=not calibration.calibrated or None,
    )
    accuracy, calls, calls_se = _observed(governed)
    holds = _holds(chosen, accuracy, calls, calls_se, len(governed.finals))
    if plot is not None:
        observed = (f"{CHAIN}, min {MIN_ROUNDS}", consensus, paper_calls)
        more = [Setting(CHAIN, m, MAX_ROUNDS) for m in (0, 1, 3)]
        plot_predictions(
            [*rows, *predict(fitted_run.observations, more, share_true=0.5, fitted=fitted)], observed, plot / name
        )
    checks = "; ".join(calibration.not_calibrated) or "all checks pass"
    return (
        f"| {name} | {len(calibration.classes)} | {consensus:.3f} | {posterior_verdict:.3f} | {rel.ece:.3f} | "
        f"{rel.brier:.3f} | {chosen.stop} | {accuracy:.3f} | {calls:.2f} / {paper_calls:.2f} = "
        f"{calls / paper_calls:.0%} | {chosen.accuracy:.3f} [{chosen.accuracy_interval[0]:.3f}, "
        f"{chosen.accuracy_interval[1]:.3f}] {'holds' if holds[0] else 'MISSES'} | {chosen.calls_per_claim:.2f} "
        f"[{chosen.calls_interval[0]:.2f}, {chosen.calls_interval[1]:.2f}] {'holds' if holds[1] else 'MISSES'} | "
        f"{checks} | {time.perf_counter() - started:.0f} s |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims per run")
    parser.add_argument("--populations", default=",".join(CALIBRATION_EXAMPLES), help="comma-separated names")
    parser.add_argument("--plot", type=Path, default=None, help="folder for each population's frontier plot")
    args = parser.parse_args()
    print(
        "| population | classes | paper rule: consensus accuracy | posterior-verdict accuracy | ECE | Brier | "
        "stop chosen | governed accuracy | calls: governed / paper | predicted accuracy [95% CI] | "
        "predicted calls [95% CI] | calibration | time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.populations.split(","):
        with tempfile.TemporaryDirectory() as folder:
            print(_population(name, CALIBRATION_EXAMPLES[name], args.n, Path(folder), args.plot), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
