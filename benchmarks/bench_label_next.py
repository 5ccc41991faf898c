"""What the labels worth asking for buy: ECE against the number of labelled claims, labels taken in the order
`debate dynamics fit` asks for them ("label next", under each `--label-order`) against labels taken at random
(docs/dynamics.md, "The labels worth asking for").

    python benchmarks/bench_label_next.py [--n 2000] [--test-n 2000] [--populations two-class,three-class]
        [--counts 50,100,150,200] [--step 25] [--seeds 0,1,2]

Every figure comes through the path a team's loop takes: `--n` claims of the population debated by the real engine
under the paper's rule are written as a `debate verify --output` log; the team starts with no label, fits it with
`debate dynamics fit LOG --save FILE`, labels the first `--step` claims of the saved file's `labels.label_next`
(their true labels written into the log's lines), fits again, and so on up to each of `--counts`. The random order
labels a seeded random sample of the same size. Each saved file, read back as a run reads it, scores `--test-n`
other claims: its ECE (10 bins). The summary gives the mean ECE per count and order, and the fewest chosen labels
whose mean ECE is at most what random labels reach at the largest count.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from statistics import mean, stdev

from bench_labels import draw, fit_file, said_of, scores_of

from debate.calibration import Calibration
from debate.types import Report
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.simulate import Population
from experiments.dynamics.simulate_run import write_results_log

ORDERS = {"random": None, "default": "random", "variance": "variance"}
"""The columns: a random sample of claims (no file's order), and each `--label-order` a team can follow (the default
is named so: its figures are the shipped behaviour)."""


def _fit(
    folder: Path,
    name: str,
    labels: dict[str, bool],
    known: set[str],
    reports: list[Report],
    label_order: str | None = None,
) -> Calibration:
    log = folder / f"{name}.jsonl"
    write_results_log(log, {k: (v if k in known else None) for k, v in labels.items()}, reports)
    return fit_file(log, folder / f"{name}.json", None, label_order=label_order)


def _chosen(
    folder: Path, labels: dict[str, bool], reports: list[Report], counts: list[int], step: int, order: str
) -> dict[int, Calibration]:
    """The files of a team that labels, each round, the first `step` claims of its last file's label-next order
    (`debate dynamics fit --label-order ORDER`)."""
    known: set[str] = set()
    calibration = _fit(folder, f"{order}-0", labels, known, reports, order)
    out: dict[int, Calibration] = {}
    while len(known) < max(counts):
        asked = calibration.labels.label_next if calibration.labels is not None else []
        wanted = min(step, min(c for c in counts if c > len(known)) - len(known))
        new = [a.claim.split("/")[0] for a in asked if a.claim.split("/")[0] not in known][:wanted]
        if not new:
            raise SystemExit(f"the file at {len(known)} labels asks for no more claims")
        known |= set(new)
        calibration = _fit(folder, f"{order}-{len(known)}", labels, known, reports, order)
        if len(known) in counts:
            out[len(known)] = calibration
    return out


def _population(
    name: str, population: Population, n: int, test_n: int, counts: list[int], step: int, seed: int
) -> list[tuple[str, int, float, str]]:
    """Per count and order: the order, the count, the ECE and what the file is."""
    labels, reports, test = draw(population, n, test_n, seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        drawn = random.Random(seed).sample(list(labels), max(counts))
        files = {("random", c): _fit(folder, f"random-{c}", labels, set(drawn[:c]), reports) for c in counts}
        for column, order in ORDERS.items():
            if order is not None:
                files |= {(column, c): f for c, f in _chosen(folder, labels, reports, counts, step, order).items()}
        for (order, count), calibration in sorted(files.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            ece, _, _ = scores_of(calibration.posterior, test)
            kind = f"{len(calibration.classes)} {calibration.classes[0].family}"
            rows.append((order, count, ece, f"{kind}; {said_of(calibration)}"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims fitted")
    parser.add_argument("--test-n", type=int, default=2000, help="other claims scored")
    parser.add_argument("--populations", default="two-class,three-class", help="comma-separated names")
    parser.add_argument("--counts", default="50,100,150,200", help="labelled claims at which each order is scored")
    parser.add_argument("--step", type=int, default=25, help="labels a round of the chosen order adds")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated draws")
    args = parser.parse_args()
    counts = sorted(int(c) for c in args.counts.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    print("| population | claims | seed | labelled | order | ECE | the file |")
    print("|---|---|---|---|---|---|---|")
    eces: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for name in args.populations.split(","):
        for seed in seeds:
            for order, count, ece, said in _population(
                name, CALIBRATION_EXAMPLES[name], args.n, args.test_n, counts, args.step, seed
            ):
                print(f"| {name} | {args.n:,} | {seed} | {count} | {order} | {ece:.3f} | {said} |", flush=True)
                eces[(name, order, count)].append(ece)
    print(f"\nMean ECE over {len(seeds)} draws (seeds {args.seeds}; sd in brackets):\n")
    print("| population | labelled | random sample | default order (spread, then random) | variance order |")
    print("|---|---|---|---|---|")
    for name in args.populations.split(","):
        for count in counts:
            cells = []
            for order in ORDERS:
                values = eces[(name, order, count)]
                sd = f" ({stdev(values):.3f})" if len(values) > 1 else ""
                cells.append(f"{mean(values):.3f}{sd}")
            print(f"| {name} | {count} ({count / args.n:.1%}) | {' | '.join(cells)} |")
        goal = mean(eces[(name, "random", counts[-1])])
        for order in ("default", "variance"):
            reached = [c for c in counts if mean(eces[(name, order, c)]) <= goal]
            said = f"{reached[0]} labels in the {order} order" if reached else f"the {order} order up to {counts[-1]}"
            print(f"{name}: random labels reach ECE {goal:.3f} at {counts[-1]}; {said} reach it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
