"""What labels and a stated base rate buy a calibration: the figures of docs/dynamics.md, "A fit without labels".

    python benchmarks/bench_labels.py [--n 2000] [--test-n 2000] [--populations markov,lenient,...]
        [--labels 0,5,10,100] [--base-rates 0.5]

Every figure comes through the path a user's run takes: per population (experiments/dynamics/examples.py,
CALIBRATION_EXAMPLES), `--n` claims debated by the real engine under the paper's rule (true-to-skeptic, min 2,
max 5) are written as a `debate verify --output` log whose lines carry `label_factual` for `--labels` percent of
them (a seeded random sample; 100: every line labelled), fitted by `debate dynamics fit LOG --save FILE` (and again
with `--base-rate P` for each of `--base-rates` on the unlabelled log; "prior P": the free fit's file with
`--debate.prior P` applied, as a run does), and the saved file, read back as a run reads
it, scores `--test-n` other claims run under the paper's rule: the ECE (10 bins) and Brier score of p_factual, and
the accuracy of its side. Then the posterior stop at the threshold the labelled fit's cheapest matching setting uses
(as bench_posterior.py chooses it), decided by each file, computed exactly under the true population (every way a
debate can end, weighed by the population's own rates: no sampling): its accuracy and turns per claim, and those
turns as a share of the paper's rule's (observed on the scoring run, which is debated under it). The memory
population has no exact outcome and gets "-" there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean, stdev

from debate.calibration import Calibration, load_calibration
from debate.cli import main as debate
from debate.engine import PosteriorModel, TurnContext, governed_outcome, governed_paths, load_chain
from debate.types import Report
from experiments.dynamics import Observation, fit_model, observations
from experiments.dynamics.calibrate import reliability
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.fitted import FittedModel
from experiments.dynamics.predict import Setting, predict
from experiments.dynamics.readers import read_run
from experiments.dynamics.replicate import design_of
from experiments.dynamics.simulate import Population, labels_for, simulate_debates, simulated_reports
from experiments.dynamics.simulate_run import write_results_log

CHAIN, MIN_ROUNDS, MAX_ROUNDS = "true-to-skeptic", 2, 5
THRESHOLDS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99)


def seen_of(population: Population, n: int, seed: int, prefix: str) -> list[Observation]:
    results = asyncio.run(
        simulate_debates(
            population,
            chain=CHAIN,
            min_rounds=MIN_ROUNDS,
            max_rounds=MAX_ROUNDS,
            labels=labels_for(n, 0.5, seed, prefix=prefix),
        )
    )
    spec = load_chain(CHAIN)
    return [o for item, label, r in results for o in observations(r, spec, item=item, label=label)]


def scores_of(governor: PosteriorModel, test: list[Observation]) -> tuple[float, float, float]:
    """ECE, Brier and the accuracy of the posterior's side on the scoring run."""
    turns: dict[str, list[TurnContext]] = defaultdict(list)
    labels: dict[str, bool] = {}
    for o in test:
        turns[o.item].append(TurnContext(o.role, o.state, o.shown, o.verdict))
        labels[o.item] = bool(o.label)
    pairs = [(p, labels[k]) for k, t in turns.items() if (p := governor.p_factual(t)) is not None]
    rel = reliability(pairs)
    return rel.ece, rel.brier, sum((p > 0.5) == label for p, label in pairs) / len(pairs)


def _stop(population: Population, governor: PosteriorModel, threshold: float) -> tuple[float, float] | None:
    """Accuracy and turns per claim of the posterior stop decided by `governor`, under the true population (half
    the claims factual); None for a population with memory (no exact outcome)."""
    if not population.markov:
        return None
    chain = load_chain(CHAIN)
    paths = governed_paths(governor, chain, threshold=threshold, max_rounds=MAX_ROUNDS)
    accuracy = turns = 0.0
    for share, component in population.components():
        for label in (True, False):
            out = governed_outcome(paths, component, label=label)
            accuracy += 0.5 * share * (out.p_true if label else 1 - out.p_true)
            turns += 0.5 * share * out.turns
    return accuracy, turns


def _threshold(fitted: FittedModel, seen: list[Observation]) -> float:
    """The cheapest threshold whose predicted accuracy reaches the paper rule's, under the labelled fit."""
    settings = [Setting(CHAIN, MIN_ROUNDS, MAX_ROUNDS)] + [
        Setting(CHAIN, MIN_ROUNDS, MAX_ROUNDS, stop=p) for p in THRESHOLDS
    ]
    rows = predict(seen, settings, share_true=0.5, fitted=fitted)
    paper, stops = rows[0], rows[1:]
    reaching = [r for r in stops if r.accuracy >= paper.accuracy] or [max(stops, key=lambda r: r.accuracy)]
    return float(min(reaching, key=lambda r: r.calls_per_claim).stop.partition(":")[2])


def fit_file(
    log: Path, save: Path, base_rate: float | None, model: str = "auto", label_order: str | None = None
) -> Calibration:
    """`debate dynamics fit LOG --save FILE [--base-rate P] [--model M] [--label-order O]`, then the file as a run
    reads it."""
    argv = ["dynamics", "fit", str(log), "--bootstrap", "10", "--save", str(save), "--model", model]
    if label_order is not None:
        argv += ["--label-order", label_order]
    if base_rate is not None:
        argv += ["--base-rate", str(base_rate)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as said:
        code = debate(argv)
    if code != 0:
        raise SystemExit(f"debate {' '.join(argv)} failed: {said.getvalue()}")
    return load_calibration(save)


def said_of(calibration: Calibration) -> str:
    labels = calibration.labels
    said: str = "labelled fit" if labels is None else labels.orientation
    if labels is not None and labels.recalibration is not None:
        said = "corrected by labels"
    if not calibration.calibrated:
        said += "; not calibrated: " + ", ".join(
            line.split(" (")[0].split(":")[0] for line in calibration.not_calibrated
        )
    return said


def draw(
    population: Population, n: int, test_n: int, seed: int
) -> tuple[dict[str, bool], list[Report], list[Observation]]:
    """The `n` claims to fit (their true labels and reports, debated by the engine under the paper's rule) and the
    `test_n` other claims that score the files. Seed 0 is the docs' draw; another seed draws other claims (ids,
    labels, the labelled sample, the test run)."""
    tag = "" if seed == 0 else str(seed)
    labels = labels_for(n, 0.5, 1 + 10 * seed, prefix=f"sim{tag}")
    reports = asyncio.run(
        simulated_reports(
            population, chain=CHAIN, min_rounds=MIN_ROUNDS, max_rounds=MAX_ROUNDS, labels=labels, concurrency=64
        )
    )
    return labels, reports, seen_of(population, test_n, 2 + 10 * seed, f"test{tag}")


def _population(
    name: str,
    population: Population,
    n: int,
    test_n: int,
    percents: list[float],
    rates: list[float],
    model: str,
    seed: int = 0,
) -> list[tuple[str, str, float]]:
    """Per fit: its table row, what it is (population, labelled, base rate) and its ECE."""
    labels, reports, test = draw(population, n, test_n, seed)
    # the paper's rule's turns per claim, observed on the scoring run (debated under it)
    paper_turns = len(test) / len({o.item for o in test})
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fits: list[tuple[str, float | None, Path]] = []
        for percent in percents:
            kept = set(random.Random(seed).sample(list(labels), round(len(labels) * percent / 100)))
            log = folder / f"log-{percent:g}.jsonl"
            write_results_log(log, {k: (v if k in kept else None) for k, v in labels.items()}, reports)
            fits.append((f"{percent:g}%", None, log))
            if percent == 0:
                fits += [(f"{percent:g}%", rate, log) for rate in rates]
        labelled_log = folder / "log-all.jsonl"
        write_results_log(labelled_log, dict(labels), reports)
        run = read_run(labelled_log)
        threshold = _threshold(fit_model(run.observations, bootstrap=0, designs=[design_of(run)]), run.observations)
        scored: list[tuple[str, float | None, Calibration, PosteriorModel, float, str]] = []
        for i, (said, rate, log) in enumerate(fits):
            started = time.perf_counter()
            calibration = fit_file(log, folder / f"cal-{i}.json", rate, model)
            took = time.perf_counter() - started
            scored.append((said, rate, calibration, calibration.posterior, took, "-" if rate is None else f"{rate:g}"))
            if said == "0%" and rate is None:
                # the same rates applied after the free fit, as `--debate.prior P` on verify does
                scored += [(said, None, calibration, calibration.model(r), took, f"prior {r:g}") for r in rates]
        for said, _, calibration, governor, took, stated in scored:
            ece, brier, accuracy = scores_of(governor, test)
            stop = _stop(population, governor, threshold)
            figures = "-"
            if stop is not None:
                share_of = f"{stop[1] / paper_turns:.0%} of the paper's {paper_turns:.2f}"
                figures = f"{stop[0]:.3f} / {stop[1]:.2f} ({share_of})"
            lab = calibration.labels
            share = f"{calibration.fitted_on.factual_share:.3f}"
            if stated.startswith("prior"):
                share += f" (fitted; {stated} applied)"
            elif lab is not None and lab.base_rate is not None:
                share += " (stated)"
            elif lab is not None and lab.share_interval is not None:
                share += f" [{lab.share_interval[0]:.3f}, {lab.share_interval[1]:.3f}]"
            kind = f"{len(calibration.classes)} {calibration.classes[0].family}"
            row = (
                f"| {name} | {n:,} | {seed} | {said} | {stated} | {kind} | "
                f"{share} | {ece:.3f} | {brier:.3f} | {accuracy:.3f} | posterior:{threshold:g} | {figures} | "
                f"{said_of(calibration)} | {took:.1f} s |"
            )
            rows.append((row, f"| {name} | {n:,} | {said} | {stated} |", ece))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims fitted")
    parser.add_argument("--test-n", type=int, default=2000, help="other claims scored")
    parser.add_argument("--populations", default=",".join(CALIBRATION_EXAMPLES), help="comma-separated names")
    parser.add_argument("--labels", default="0,5,10,100", help="percents of the fitted claims labelled")
    parser.add_argument("--base-rates", default="0.5", help="base rates stated on the unlabelled fit ('' for none)")
    parser.add_argument(
        "--model", default="auto", choices=["auto", "one-class", "mixture"], help="`debate dynamics fit --model`"
    )
    parser.add_argument("--seeds", default="0", help="comma-separated draws (0: the docs' draw); several: a summary")
    args = parser.parse_args()
    percents = [float(p) for p in args.labels.split(",")]
    rates = [float(r) for r in args.base_rates.split(",") if r]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        "| population | claims | seed | labelled | base rate | classes, family | share factual [95%] | ECE | Brier | "
        "accuracy of p's side | stop | stop: accuracy / turns | what the file says | fit time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    eces: dict[str, list[float]] = defaultdict(list)
    for name in args.populations.split(","):
        for seed in seeds:
            for row, key, ece in _population(
                name, CALIBRATION_EXAMPLES[name], args.n, args.test_n, percents, rates, args.model, seed
            ):
                print(row, flush=True)
                eces[key].append(ece)
    if len(seeds) > 1:
        print(f"\nECE over {len(seeds)} draws (seeds {args.seeds}):\n")
        print("| population | claims | labelled | base rate | ECE mean | sd | min | max |")
        print("|---|---|---|---|---|---|---|---|")
        for key, values in eces.items():
            print(f"{key} {mean(values):.3f} | {stdev(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
