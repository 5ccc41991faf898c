"""Debate dynamics, measured: how fast `predict` is, how often each check fires (false alarms on the Markov
population, power on the ones that break an assumption), and each example population's predictions beside the
truth (the tables in docs/dynamics.md).

    python benchmarks/bench_dynamics.py [--seeds 20] [--n 800] [--truth-n 3000]

Every run goes through the real engine against the simulated population, in process. The truth is exact (the
population's own parameters through the exact computation) for Markov populations and mixtures of them; for the
memory population, which the exact computation cannot hold, it is a simulated run of `--truth-n` claims per setting.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter

from debate.engine import load_chain
from experiments.dynamics import Observation, diagnose, fit_model, observations, predict
from experiments.dynamics.examples import EXAMPLES
from experiments.dynamics.predict import Setting
from experiments.dynamics.simulate import Population, exact_accuracy, labels_for, observed, simulate_debates

FITTED = Setting("true-to-skeptic", 2, 4)
SETTINGS = [Setting(c, 2, 4) for c in ("true-to-trust", "always-skeptic", "always-trust")] + [
    Setting("true-to-skeptic", m, 4) for m in (0, 1, 3)
]


def _run(population: Population, setting: Setting, n: int, labels_seed: int) -> list[Observation]:
    labels = labels_for(n, 0.5, labels_seed)
    results = asyncio.run(
        simulate_debates(
            population, chain=setting.chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds, labels=labels
        )
    )
    spec = load_chain(setting.chain)
    return [o for item, label, r in results for o in observations(r, spec, item=item, label=label)]


def _truth(population: Population, setting: Setting, n: int) -> tuple[float, str]:
    if population.markov:
        return exact_accuracy(population, setting), "exact"
    results = asyncio.run(
        simulate_debates(
            population.model_copy(update={"seed": 999}),
            chain=setting.chain,
            min_rounds=setting.min_rounds,
            max_rounds=setting.max_rounds,
            labels=labels_for(n, 0.5, 999),
        )
    )
    yes, no, _ = observed(results)
    return 0.5 * yes + 0.5 * (1 - no), f"simulated, n = {n}"


def speed() -> None:
    seen = _run(EXAMPLES["two-class"], FITTED, 2000, 1)
    settings = [
        Setting(c, m, 4)
        for c in ("true-to-skeptic", "always-trust", "true-to-trust", "always-skeptic")
        for m in range(4)
    ]
    started = time.perf_counter()
    fitted = fit_model(seen, bootstrap=200)
    fit_s = time.perf_counter() - started
    predict(seen, settings, share_true=0.5, fitted=fitted)
    total = time.perf_counter() - started
    print(
        f"speed: fit of 2000 claims ({len(seen)} turns, {fitted.choice.classes} classes, 200 replicates) "
        f"{fit_s:.1f} s; with a 16-setting prediction {total:.1f} s (target: under 60 s)"
    )


def rates(seeds: int, n: int, names: list[str]) -> None:
    print(f"\nchecks that fire, over {seeds} independent runs of {n} claims each (true-to-skeptic, min 2, max 4):")
    for name in names:
        population = EXAMPLES[name]
        fired: Counter[str] = Counter()
        warned = mixtures = 0
        for seed in range(seeds):
            seen = _run(population.model_copy(update={"seed": 1000 + seed}), FITTED, n, 2000 + seed)
            fitted = fit_model(seen, bootstrap=0, seed=seed)
            found = diagnose(seen, fitted.choice)
            fired.update(c.name for c in found.checks if c.rejected)
            warned += bool(found.warnings)
            mixtures += fitted.choice.classes > 1
        listed = ", ".join(f"{c} {fired[c] / seeds:.0%}" for c in ("markov", "heterogeneity", "state"))
        print(f"  {name:10} {listed}; any warning {warned / seeds:.0%}; mixture chosen {mixtures / seeds:.0%}")


def tables(n: int, truth_n: int) -> None:
    for name, population in EXAMPLES.items():
        seen = _run(population, FITTED, n, 1)
        fitted = fit_model(seen, bootstrap=200)
        found = diagnose(seen, fitted.choice)
        print(f"\n## {name}: fitted on {n} claims of {FITTED}")
        print(f"model: {found.model.describe()}")
        for line in found.warnings:
            print(f"WARNING: {line}")
        print("| setting | predicted accuracy [95% CI] | back-off range | one class only [95% CI] | true accuracy |")
        held = one_held = 0
        one_class = predict(seen, SETTINGS, share_true=0.5, bootstrap=200, model="one-class")
        rows = predict(seen, SETTINGS, share_true=0.5, fitted=fitted)
        for setting, p, q in zip(SETTINGS, rows, one_class, strict=True):
            truth, how = _truth(population, setting, truth_n)
            (low, high), (q_low, q_high) = p.accuracy_interval, q.accuracy_interval
            held += low <= truth <= high
            one_held += q_low <= truth <= q_high
            backoff = f"[{p.backoff_range[0]:.3f}, {p.backoff_range[1]:.3f}]" if p.backoff_range else "-"
            miss, q_miss = ("" if a <= truth <= b else " (misses)" for a, b in ((low, high), (q_low, q_high)))
            print(
                f"| {setting.chain}, min {setting.min_rounds} | {p.accuracy:.3f} [{low:.3f}, {high:.3f}]{miss} | "
                f"{backoff} | {q.accuracy:.3f} [{q_low:.3f}, {q_high:.3f}]{q_miss} | {truth:.3f} ({how}) |"
            )
        print(
            f"{held} of {len(SETTINGS)} true accuracies inside the intervals of the model used; {one_held} inside "
            "the one-class model's"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--truth-n", type=int, default=3000)
    parser.add_argument("--only", choices=["speed", "rates", "tables"], default=None)
    parser.add_argument("--population", choices=list(EXAMPLES), action="append", help="rates: these (default: all)")
    args = parser.parse_args()
    if args.only in (None, "speed"):
        speed()
    if args.only in (None, "rates"):
        rates(args.seeds, args.n, args.population or list(EXAMPLES))
    if args.only in (None, "tables"):
        tables(args.n, args.truth_n)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
