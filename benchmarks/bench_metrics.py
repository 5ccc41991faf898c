"""CPU time of `debate eval`'s metrics (every metric with 1,000 bootstrap resamples) for n items.

python benchmarks/bench_metrics.py --n 10000
"""

from __future__ import annotations

import argparse
import random
import time

from experiments.metrics import Outcome, summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(0)
    outcomes = [
        Outcome(rng.random() < 0.5, rng.choice([True, False, None]), rng.choice([None, 0.0, 0.3, 0.5, 0.8, 1.0]))
        for _ in range(args.n)
    ]
    started = time.process_time()
    summarize(outcomes, seed=0, resamples=args.resamples)
    cpu = time.process_time() - started
    # A run's metrics: the method and its two baselines (length-only, majority-class) on the same items.
    baselines = [Outcome(o.label, o.label if i % 3 else not o.label, None) for i, o in enumerate(outcomes)]
    summarize(baselines, seed=0, resamples=args.resamples)
    summarize([Outcome(o.label, True, None) for o in outcomes], seed=0, resamples=args.resamples)
    run_cpu = time.process_time() - started
    print(
        f"n={args.n}, {args.resamples} resamples: one summary {cpu:.2f} s CPU; a run's three summaries (method and "
        f"two baselines; scipy draws the same seeded resamples for each) {run_cpu:.2f} s CPU"
    )


if __name__ == "__main__":
    main()
