"""What labels buy a calibration: the figures of docs/dynamics.md, "A fit without labels".

    python benchmarks/bench_labels.py [--n 2000] [--populations markov,two-class,...] [--labels 0,1,5,10,100]

Per population (experiments/dynamics/examples.py, CALIBRATION_EXAMPLES): a run of `--n` claims under the paper's rule
(true-to-skeptic, min 2, max 5) is fitted with `--labels` percent of its claims labelled (a seeded random sample;
100: the labelled fit of `debate dynamics fit`, below it the latent fit, its labels held out to test and correct
it), and scored on `--n` other claims run under the paper's rule: the ECE (10 bins) and Brier score of p_factual,
and the accuracy of its side. Then the posterior stop at the threshold the labelled fit's cheapest matching setting
uses (as bench_posterior.py chooses it), decided by each fit, computed exactly under the true population (every way a
debate can end, weighed by the population's own rates: no sampling): its accuracy and calls per claim. The memory
population has no exact outcome and gets "-" there.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import defaultdict
from dataclasses import replace

from debate.calibration import not_calibrated
from debate.engine import PosteriorModel, TurnContext, governed_outcome, governed_paths, load_chain
from experiments.dynamics import Observation, fit_model, observations
from experiments.dynamics.calibrate import reliability
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.fitted import FittedModel
from experiments.dynamics.predict import Setting, governor_of, predict
from experiments.dynamics.replicate import Design
from experiments.dynamics.simulate import Population, labels_for, simulate_debates

CHAIN, MIN_ROUNDS, MAX_ROUNDS = "true-to-skeptic", 2, 5
THRESHOLDS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99)


def _seen(population: Population, n: int, seed: int, prefix: str) -> list[Observation]:
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


def _labelled(seen: list[Observation], percent: float) -> list[Observation]:
    if percent >= 100:
        return seen
    items = list(dict.fromkeys(o.item for o in seen))
    kept = set(random.Random(0).sample(items, round(len(items) * percent / 100)))
    return [o if o.item in kept else replace(o, label=None) for o in seen]


def _scores(governor: PosteriorModel, test: list[Observation]) -> tuple[float, float, float]:
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


def _population(name: str, population: Population, n: int, percents: list[float]) -> list[str]:
    seen, test = _seen(population, n, 1, "sim"), _seen(population, n, 2, "test")
    design = Design(load_chain(CHAIN), MIN_ROUNDS, MAX_ROUNDS, tuple(dict.fromkeys(o.item for o in seen)))
    labelled = fit_model(seen, bootstrap=0, designs=[design])
    threshold = _threshold(labelled, seen)
    rows = []
    for percent in percents:
        started = time.perf_counter()
        fitted = labelled if percent >= 100 else fit_model(_labelled(seen, percent), bootstrap=0, designs=[design])
        governor = governor_of(fitted)
        ece, brier, accuracy = _scores(governor, test)
        stop = _stop(population, governor, threshold)
        labels = fitted.choice.labels
        said: str = "labelled fit" if labels is None else labels.orientation
        if labels is not None and labels.recalibration is not None:
            said = "corrected by labels"
        failed = not_calibrated(list(fitted.diagnostics.checks), fitted.choice.classes, labels)
        if failed:
            said += "; not calibrated: " + ", ".join(line.split(" (")[0] for line in failed)
        figures = f"{stop[0]:.3f} | {stop[1]:.2f}" if stop is not None else "- | -"
        rows.append(
            f"| {name} | {percent:g}% | {fitted.choice.classes} | {fitted.indexed.factual_share():.3f} | {ece:.3f} | "
            f"{brier:.3f} | {accuracy:.3f} | posterior:{threshold:g} | {figures} | {said} | "
            f"{time.perf_counter() - started:.1f} s |"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims per run")
    parser.add_argument("--populations", default=",".join(CALIBRATION_EXAMPLES), help="comma-separated names")
    parser.add_argument("--labels", default="0,1,5,10,100", help="percents of the fitted run's claims labelled")
    args = parser.parse_args()
    percents = [float(p) for p in args.labels.split(",")]
    print(
        "| population | labelled | classes | fitted share factual | ECE | Brier | accuracy of p's side | stop | "
        "stop: accuracy | stop: turns per claim | what the labels did | fit time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.populations.split(","):
        for row in _population(name, CALIBRATION_EXAMPLES[name], args.n, percents):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
