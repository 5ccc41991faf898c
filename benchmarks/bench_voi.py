"""Spending each call where it decides: accuracy against cost for every stop rule (docs/teams.md, "Choosing the
next turn").

    python benchmarks/bench_voi.py [--n 1000] [--pilot-n 600] [--thresholds 0.95,0.97,0.99]
        [--scenarios alike,cost,unlabelled,memory] [--plot docs/figures/voi.png]

Simulated agents (experiments/teams.py) answer behind OpenAI-compatible endpoints on 127.0.0.1, each charging
tokens (4 characters each) at its model's price. Every figure comes through the path a user takes: a config file
per arm, `debate verify --config FILE --input claims.jsonl --output LOG`, and the saved log read back; each
calibration is fitted by `debate dynamics fit LOG --save FILE` on a pilot of `--pilot-n` other claims and read back
from its file.

Scenarios:
- alike: one model whose items are alike. Arms: the paper's rule (min 2, max 5; the reference), `posterior:P` and
  `voi:P` (one team: voi chooses only when to stop, by reach);
- cost: a weak model and a strong one at 10x its price. Arms: the strong team under the paper's rule (the
  reference) and `posterior:P`, the cascade weak (2 rounds) -> strong (3 more) at P, and `voi:P` over both teams;
- unlabelled: a lenient model (every role leans to "true"; items alike) with a calibration fitted on an unlabelled
  pilot: its share interval is too wide to pin the base rate, and the stops decide on the interval's worst case;
- memory: the cost scenario's models with agents that remember (not Markov): the calibrations' checks must fail,
  and the stops refuse them (exit 2, said on the row).

Per arm: accuracy by the verdict, calls and cost per claim, each with a 95% bootstrap interval over the claims; the
paired difference with the reference (the same claims); the share of the reference's calls and cost; and the calls
a team made at a turn from which, by its saved calibration, it could not reach the threshold (the reach rule says
none). The Pareto front (no arm both cheaper and more accurate) is marked per scenario.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_teams import claims_file, fit, model_section, per_claim, run, serving

from debate.calibration import load_calibration
from debate.engine import (
    Spoken,
    TeamView,
    TurnPolicy,
    load_chain,
    position_of,
    reach_from,
    result_records,
    turn_contexts,
)
from debate.types import Report
from experiments.dynamics.simulate import labels_for

CHAIN = load_chain("true-to-skeptic")
SCENARIOS = {"alike": ("alike", None), "cost": ("weak", "strong"), "unlabelled": ("lenient", None)}
SCENARIOS["memory"] = ("weak-memory", "strong-memory")
FILES: list[str] = []
"""What each fitted calibration file says of itself, printed under the table."""


@dataclass
class Arm:
    """One stop rule on one scenario, as a config file's `[debate]` table and its cascade teams."""

    name: str
    model: str
    debate: str
    cascade: list[tuple[str, str, int]] = field(default_factory=list)
    """(team name, model, its max_rounds)."""


def config_text(arm: Arm, urls: dict[str, str], calibrations: dict[str, Path]) -> str:
    text = f"[model]\n{model_section(arm.model, urls)}\n[debate]\n{arm.debate}\n"
    for name, model, rounds in arm.cascade:
        text += (
            f'[[debate.cascade]]\nname = "{name}"\ncalibration = "{calibrations[model]}"\nmax_rounds = {rounds}\n'
            f"[debate.cascade.model]\n{model_section(model, urls)}"
        )
    return text


def arms(scenario: str, calibrations: dict[str, Path], thresholds: list[float]) -> list[Arm]:
    first, second = SCENARIOS[scenario]
    if second is None:
        own = calibrations[first]
        rows = [Arm("paper's rule", first, "min_rounds = 2\nmax_rounds = 5")]
        for p in thresholds:
            rows += [
                Arm(f"posterior:{p:g}", first, f'max_rounds = 5\nstop = "posterior:{p}"\ncalibration = "{own}"'),
                Arm(f"voi:{p:g}", first, f'max_rounds = 5\nstop = "voi:{p}"\ncalibration = "{own}"'),
            ]
        return rows
    strong = calibrations[second]
    rows = [Arm(f"all {second}, paper's rule", second, "min_rounds = 2\nmax_rounds = 5")]
    for p in thresholds:
        weak = f'min_rounds = 0\nmax_rounds = 2\ncalibration = "{calibrations[first]}"\n'
        rows += [
            Arm(
                f"all {second}, posterior:{p:g}",
                second,
                f'max_rounds = 5\nstop = "posterior:{p}"\ncalibration = "{strong}"',
            ),
            Arm(f"cascade {first} -> {second} at {p:g}", first, weak + f'stop = "cascade:{p}"', [(second, second, 3)]),
            Arm(f"voi:{p:g} over {first}, {second}", first, weak + f'stop = "voi:{p}"', [(second, second, 3)]),
        ]
    return rows


def unreachable_calls(records: list[dict[str, object]], config: Path) -> int:
    """Calls made at a turn from which the team that spoke it could not reach the threshold, by the saved
    calibrations: each turn's team and where its run of turns began read from the report, its reader and reach
    recomputed as the rule defines them (debate.engine.TurnPolicy.reader, reach_from)."""
    settings = tomllib.loads(config.read_text())["debate"]
    stop = str(settings.get("stop", "consensus"))
    if not stop.startswith(("cascade", "voi")):
        return 0
    threshold = float(stop.split(":")[1])
    steps = [("first", settings["calibration"], settings.get("max_rounds", 5))]
    steps += [(c["name"], c["calibration"], c.get("max_rounds", 2)) for c in settings.get("cascade", [])]
    limits = list(itertools.accumulate(rounds for _, _, rounds in steps))
    teams = [TeamView(name, load_calibration(file).ends(), lambda role: 1.0) for name, file, _ in steps]
    policy = TurnPolicy(teams, CHAIN, threshold, limits[-1], 1)
    names = [name for name, _, _ in steps]
    count = 0
    for record in records:
        debate = Report.model_validate(record["result"]).claims[0].debate
        if debate is None or not debate.teams:
            continue
        contexts = turn_contexts(CHAIN, result_records(debate, CHAIN))
        spoken: list[Spoken] = []
        for part in debate.teams:
            k = names.index(part.name)
            for i in range(part.first_turn, min(part.first_turn + part.turns, len(contexts))):
                handed = policy.read(spoken[: part.first_turn])[1] if part.first_turn else None
                reader, base = policy.reader(k, spoken, handed)
                limit = limits[k] if stop.startswith("cascade") else limits[-1]
                position = position_of(CHAIN, [c.verdict for _, c in spoken])
                reach = reach_from(
                    reader, CHAIN, position, base, threshold=threshold, max_rounds=limit, stop_at_decidable=True
                )
                count += 0 if reach.decidable(threshold) else 1
                spoken.append((k, contexts[i]))
    return count


def paired(values: np.ndarray, reference: np.ndarray, boot: int, scale: float = 1.0) -> tuple[float, float, float]:
    """The mean difference with the reference on the same claims and its 95% bootstrap interval."""
    return interval(values - reference, boot, scale)


def interval(values: np.ndarray, boot: int, scale: float = 1.0) -> tuple[float, float, float]:
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(boot, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()) * scale, float(low) * scale, float(high) * scale


def front(rows: list[dict[str, object]]) -> set[str]:
    """The arms no other arm of the scenario beats on both accuracy and cost (ties kept)."""
    ran = [r for r in rows if r.get("accuracy") is not None]
    return {
        str(r["arm"])
        for r in ran
        if not any(
            o["cost"][0] <= r["cost"][0]
            and o["accuracy"][0] >= r["accuracy"][0]  # type: ignore[index]
            and (o["cost"][0] < r["cost"][0] or o["accuracy"][0] > r["accuracy"][0])  # type: ignore[index]
            for o in ran
        )
    }


def scenario(
    name: str, folder: Path, urls: dict[str, str], said: dict[tuple[str, str], list[bool]]
) -> list[dict[str, object]]:
    first, second = SCENARIOS[name]
    test = claims_file(labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"), folder / "claims.jsonl")
    pilot_labels = labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot")
    pilot = claims_file(pilot_labels, folder / "pilot.jsonl")
    calibrations: dict[str, Path] = {}
    for model in [m for m in (first, second) if m is not None]:
        log = folder / f"pilot-{model}.jsonl"
        run(
            _write(
                folder / f"pilot-{model}.toml",
                f"[model]\n{model_section(model, urls)}\n[debate]\nmin_rounds = 2\nmax_rounds = 5\n",
            ),
            pilot,
            log,
            said,
        )
        if name == "unlabelled":
            _drop_labels(log)
        calibrations[model] = fit(log, folder / f"cal-{model}.json")
    for model, path in calibrations.items():
        saved = load_calibration(path)
        interval_said = saved.labels.share_interval if saved.labels is not None else None
        FILES.append(
            f"{name} / {model}: {'calibrated' if saved.calibrated else 'not calibrated'}"
            + (f", share interval {interval_said[0]:.3f}-{interval_said[1]:.3f}" if interval_said else "")
            + (", stopped on over the interval's worst case" if saved.stop_interval() else "")
            + (f": {saved.warning()[:240]}" if saved.warning() else "")
        )
    thresholds = [float(t) for t in ARGS.thresholds.split(",")]
    rows: list[dict[str, object]] = []
    reference: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for k, arm in enumerate(arms(name, calibrations, thresholds)):
        config = _write(folder / f"arm-{k}.toml", config_text(arm, urls, calibrations))
        try:
            records = run(config, test, folder / f"log-{k}.jsonl", said)
        except SystemExit as refused:
            rows.append({"scenario": name, "arm": arm.name, "refused": str(refused).splitlines()[-1][:300]})
            continue
        right, calls, cost, _ = per_claim(records)
        if reference is None:
            reference = (right, calls, cost)
        rows.append(
            {
                "scenario": name,
                "arm": arm.name,
                "accuracy": interval(right, ARGS.boot),
                "vs_reference": paired(right, reference[0], ARGS.boot, 100),
                "calls": interval(calls, ARGS.boot),
                "cost": interval(cost, ARGS.boot, 1000),
                "calls_share": float(calls.mean() / reference[1].mean()),
                "cost_share": float(cost.mean() / reference[2].mean()),
                "unreachable_calls": unreachable_calls(records, config),
                "stops": _stops(records),
            }
        )
    on_front = front(rows)
    for row in rows:
        row["front"] = row["arm"] in on_front
    return rows


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _drop_labels(log: Path) -> None:
    """The pilot's log without its labels: the fit then finds the truth as latent (an unlabelled pilot)."""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:
        line.pop("label_factual", None)
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _stops(records: list[dict[str, object]]) -> str:
    reasons: dict[str, int] = {}
    for record in records:
        debate = Report.model_validate(record["result"]).claims[0].debate
        reason = debate.stop_reason if debate is not None else "none"
        reasons[reason] = reasons.get(reason, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))


def shown(figure: tuple[float, float, float], digits: int = 3, sign: str = "") -> str:
    mean, low, high = figure
    return f"{mean:{sign}.{digits}f} [{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| scenario | arm | accuracy [95%] | vs the reference (points) [95%] | calls per claim | share of its calls "
        "| cost per 1,000 claims (USD) [95%] | share of its cost | calls out of reach | stops | front |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['scenario']} | {r['arm']} | refused: {r['refused']} | | | | | | | | |")
            continue
        lines.append(
            f"| {r['scenario']} | {r['arm']} | {shown(r['accuracy'])} | {shown(r['vs_reference'], 1, '+')} | "  # type: ignore[arg-type]
            f"{r['calls'][0]:.2f} | {r['calls_share']:.0%} | {shown(r['cost'], 4)} | {r['cost_share']:.0%} | "  # type: ignore[index]
            f"{r['unreachable_calls']} | {r['stops']} | {'yes' if r['front'] else ''} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Accuracy against cost per scenario, each scenario's Pareto front dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = [
        s
        for s in dict.fromkeys(str(r["scenario"]) for r in rows)
        if any("cost" in r and r["scenario"] == s for r in rows)
    ]
    figure, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4.5), squeeze=False)
    for axis, name in zip(axes[0], scenarios, strict=True):
        ran = [r for r in rows if r["scenario"] == name and "cost" in r]
        for r in ran:
            x, y = r["cost"][0], r["accuracy"][0]  # type: ignore[index]
            axis.scatter([x], [y], color="C1" if r["front"] else "C0")
            axis.annotate(str(r["arm"]), (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        line = sorted((r["cost"][0], r["accuracy"][0]) for r in ran if r["front"])  # type: ignore[index]
        axis.plot([p[0] for p in line], [p[1] for p in line], linestyle="--", linewidth=1, color="C1")
        axis.set_title(name)
        axis.set_xlabel("cost per 1,000 claims (USD)")
        axis.set_ylabel("accuracy")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def main() -> None:
    names = {m for n in ARGS.scenarios.split(",") for m in SCENARIOS[n] if m is not None}
    labels = {
        **labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"),
        **labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot"),
    }
    said: dict[tuple[str, str], list[bool]] = {}
    rows: list[dict[str, object]] = []
    with serving(labels, said, tuple(sorted(names))) as urls, tempfile.TemporaryDirectory() as tmp:
        for name in ARGS.scenarios.split(","):
            folder = Path(tmp) / name
            folder.mkdir()
            rows += scenario(name, folder, urls, said)
    print(table(rows))
    print()
    for line in FILES:
        print(line)
    if ARGS.plot:
        plot(rows, Path(ARGS.plot))
        print(f"plot: {ARGS.plot}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="claims each arm debates")
    parser.add_argument("--pilot-n", type=int, default=600, help="claims each calibration is fitted on")
    parser.add_argument("--scenarios", default="alike,cost,unlabelled,memory", help="comma-separated")
    parser.add_argument("--thresholds", default="0.95,0.97,0.99", help="P of each stop, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="which claims")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--plot", default="", help="write the accuracy-cost plot here")
    ARGS = parser.parse_args()
    main()
