"""Teams of two models: the table and the accuracy-cost plot of docs/teams.md.

    python benchmarks/bench_teams.py [--n 2000] [--pilot-n 600] [--scenarios cost,independent,shared]
        [--thresholds 0.9,0.95,0.98] [--plot docs/figures/teams.png]

Simulated agents (experiments/teams.py) answer behind OpenAI-compatible endpoints on 127.0.0.1, one per model, each
charging tokens as a tokenizer would count them (4 characters each) at its own price. Every figure comes through the
path a user takes: a config file per team (`[model]`, `[roles.<role>.model]`, `[[debate.cascade]]`), `debate verify
--config FILE --input claims.jsonl --output LOG`, and the saved log read back; the cascade's calibrations are fitted
by `debate dynamics fit` on a labelled pilot of `--pilot-n` other claims per model, and read back from their files.

Scenarios (two endpoints each):
- cost: a weak model and a strong one at 10x its price, right more often and fooled by fewer items: each alone, the
  strong one as Leader, a mixed table, and the cascade from the weak team to the strong one;
- independent: the weak model and a twin family as strong and as cheap, fooled by other items;
- shared: one population behind both endpoints (the same blind spots): a mixed team is the same agents.

Each team debates `--n` claims (half factual) under the paper's rule (true-to-skeptic, min 2, max 5); the cascade's
first team stops by the posterior at each of `--thresholds` within 2 rounds and hands what it leaves undecided to the
strong team for up to 3 more. Intervals are 95% bootstrap intervals over the claims (paired for differences).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import numpy as np

from debate.cli import main as debate
from debate.engine import load_chain
from debate.pipeline import Price, cost_of
from debate.types import Report
from experiments.dynamics.endpoint import population_endpoint
from experiments.dynamics.simulate import SimulatedAgents, labels_for
from experiments.teams import FAMILIES, PRICES, Composition, compositions

SCENARIOS = {"cost": ("weak", "strong"), "independent": ("weak", "twin"), "shared": ("weak", "weak-b")}
"""Each scenario's two endpoints: weak-b serves the weak population itself (one population behind both)."""

SERVED = ("weak", "strong", "twin", "weak-b")
"""The endpoints this benchmark's scenarios use."""


@contextlib.contextmanager
def serving(
    labels: dict[str, bool], said: dict[tuple[str, str], list[bool]], names: tuple[str, ...] = SERVED
) -> Iterator[dict[str, str]]:
    """Each named model's endpoint on 127.0.0.1 (experiments.teams.FAMILIES), served from a thread of its own while
    the block runs; yields the URLs."""
    chain, ready, stop = load_chain("true-to-skeptic"), queue.Queue[dict[str, str]](), threading.Event()

    async def serve() -> None:
        async with AsyncExitStack() as stack:
            urls = {}
            for name in names:
                agents = SimulatedAgents(FAMILIES[name], chain, labels, name=name, said=said)
                urls[name] = await stack.enter_async_context(population_endpoint(agents))
            ready.put(urls)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    try:
        yield ready.get(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=10)


def model_section(name: str, urls: dict[str, str]) -> str:
    """A `[model]` table's lines for the named model's endpoint at its price."""
    price_in, price_out = PRICES[name]
    return (
        f'base_url = "{urls[name]}"\nmodel = "{name}"\nprice_in = {price_in}\nprice_out = {price_out}\n'
        "max_concurrency = 16\n"
    )


def config_file(
    team: Composition, urls: dict[str, str], folder: Path, calibrations: dict[str, Path], own: Path | None = None
) -> Path:
    """The team as a user writes it (`own`: its calibration, so each claim gets its p_factual)."""
    text = f"[model]\n{model_section(team.model, urls)}\n"
    for role, name in team.roles.items():
        text += f"[roles.{role}.model]\n{model_section(name, urls)}\n"
    if team.cascade is None:
        text += "[debate]\nmin_rounds = 2\nmax_rounds = 5\n" + (f'calibration = "{own}"\n' if own else "")
    else:
        text += (
            f'[debate]\nmin_rounds = 0\nmax_rounds = 2\nstop = "cascade:{team.threshold}"\n'
            f'calibration = "{calibrations[team.model]}"\n\n[[debate.cascade]]\nname = "{team.cascade}"\n'
            f'calibration = "{calibrations[team.cascade]}"\nmax_rounds = 3\n'
            f"[debate.cascade.model]\n{model_section(team.cascade, urls)}"
        )
    path = folder / f"{abs(hash(team.name))}.toml"
    path.write_text(text)
    return path


def claims_file(labels: dict[str, bool], path: Path) -> Path:
    lines = [
        {"id": i, "question": "q", "response": "a", "reference": "k", "label_factual": t} for i, t in labels.items()
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def run(config: Path, claims: Path, log: Path, said: dict[tuple[str, str], list[bool]]) -> list[dict[str, object]]:
    """`debate verify --config FILE --input CLAIMS --output LOG`, and the log read back."""
    said.clear()  # a new run: no earlier debate on these items
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = debate(
            ["verify", "--config", str(config), "--input", str(claims), "--output", str(log), "--items", "32"]
        )
    if code != 0:
        raise SystemExit(f"debate verify exited {code}: {err.getvalue()[-2000:]}")
    return [json.loads(line) for line in log.read_text().splitlines()]


def fit(log: Path, saved: Path) -> Path:
    fit_args([str(log), "--save", str(saved)])
    return saved


def fit_args(args: list[str]) -> None:
    """`debate dynamics fit ARGS...`, stopping the benchmark if it fails."""
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = debate(["dynamics", "fit", *args])
    if code != 0:
        raise SystemExit(f"debate dynamics fit exited {code}: {err.getvalue()[-2000:]}")


def per_claim(records: list[dict[str, object]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Per claim: right (1/0) by the verdict, model calls, cost in USD at each model's own price, and right by
    p_factual's side (None without a calibration)."""
    right, calls, cost, side = [], [], [], []
    for record in records:
        report = Report.model_validate(record["result"])
        right.append(float((report.verdict == "factual") == record["label_factual"]))
        p = report.claims[0].p_factual
        side.append(float((p >= 0.5) == record["label_factual"]) if p is not None else np.nan)
        calls.append(report.usage.llm_calls)
        spent = 0.0
        for model, usage in report.usage_by_model().items():
            price_in, price_out = PRICES[model]
            spent += cost_of(usage, Price(input=price_in, output=price_out, source="given"))
        cost.append(spent)
    sides = np.array(side)
    return np.array(right), np.array(calls, dtype=float), np.array(cost), None if np.isnan(sides).any() else sides


def interval(values: np.ndarray, scale: float = 1.0) -> tuple[float, float, float]:
    """Mean and 95% bootstrap interval of the mean."""
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(ARGS.boot, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()) * scale, float(low) * scale, float(high) * scale


def shown(figure: tuple[float, float, float], digits: int = 3) -> str:
    mean, low, high = figure
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def scenario(
    name: str, folder: Path, urls: dict[str, str], said: dict[tuple[str, str], list[bool]]
) -> list[dict[str, object]]:
    first, second = SCENARIOS[name]
    test = claims_file(labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"), folder / "claims.jsonl")
    teams = compositions(first, second, tuple(float(t) for t in ARGS.thresholds.split(",")))
    calibrations: dict[str, Path] = {}
    pilot = claims_file(labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot"), folder / "pilot.jsonl")
    if any(t.cascade for t in teams):
        for model in (first, second):
            alone = Composition(f"pilot {model}", model, {})
            run(config_file(alone, urls, folder, {}), pilot, folder / f"pilot-{model}.jsonl", said)
            calibrations[model] = fit(folder / f"pilot-{model}.jsonl", folder / f"cal-{model}.json")
    rows: list[dict[str, object]] = []
    results = {}
    for k, team in enumerate(teams):
        started = time.perf_counter()
        own = None
        if name != "cost" and team.cascade is None:
            # Each team's own calibration, fitted on its labelled pilot: p_factual's side weighs every agent.
            run(config_file(team, urls, folder, {}), pilot, folder / f"pilot-{k}.jsonl", said)
            own = fit(folder / f"pilot-{k}.jsonl", folder / f"cal-{k}.json")
        records = run(config_file(team, urls, folder, calibrations, own), test, folder / f"log-{k}.jsonl", said)
        results[team.name] = per_claim(records)
        right, calls, cost, side = results[team.name]
        escalated = sum(len(r["result"]["claims"][0]["debate"]["teams"]) > 1 for r in records)  # type: ignore[index]
        rows.append(
            {
                "scenario": name,
                "team": team.name,
                "accuracy": interval(right),
                "side": interval(side) if side is not None else None,
                "calls": interval(calls),
                "cost_per_1k": interval(cost, 1000),
                "escalated": escalated / len(records) if team.cascade else None,
                "seconds": time.perf_counter() - started,
            }
        )
    singles = [f"all {first}", f"all {second}"]
    for row in rows:
        # By p_factual's side where every team has one (each calibrated), else by the verdict.
        by_side = all(results[t][3] is not None for t in [*singles, str(row["team"])])
        mine = _rights(results[str(row["team"])], by_side)
        row["vs_singles"] = [interval(mine - _rights(results[t], by_side)) for t in singles]
        row["cost_share"] = (
            float(results[str(row["team"])][2].mean() / results[f"all {second}"][2].mean()) if name == "cost" else None
        )
    return rows


def _rights(result: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], by_side: bool) -> np.ndarray:
    side = result[3]
    return side if by_side and side is not None else result[0]


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| scenario | team | accuracy, the verdict [95%] | accuracy, p_factual's side [95%] | calls per claim | cost "
        "per 1,000 claims (USD) [95%] | vs each model alone (points) | share of the strong team's cost | escalated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        versus = "; ".join(f"{m * 100:+.1f} [{lo * 100:+.1f}, {hi * 100:+.1f}]" for m, lo, hi in row["vs_singles"])  # type: ignore[attr-defined]
        share = f"{row['cost_share']:.0%}" if row["cost_share"] is not None else "-"
        escalated = f"{row['escalated']:.0%}" if row["escalated"] is not None else "-"
        lines.append(
            f"| {row['scenario']} | {row['team']} | {shown(row['accuracy'])} | "  # type: ignore[arg-type]
            f"{shown(row['side']) if row['side'] else '-'} | {row['calls'][0]:.2f} | "  # type: ignore[index, arg-type]
            f"{shown(row['cost_per_1k'], 4)} | {versus} | {share} | {escalated} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Accuracy against cost per scenario, with each scenario's Pareto front (no team both cheaper and better)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5))
    for name in dict.fromkeys(str(r["scenario"]) for r in rows):
        points = [(r["cost_per_1k"][0], r["accuracy"][0], str(r["team"])) for r in rows if r["scenario"] == name]  # type: ignore[index]
        axis.scatter([p[0] for p in points], [p[1] for p in points], label=name)
        for x, y, team in points:
            axis.annotate(team, (x, y), fontsize=7, xytext=(4, 2), textcoords="offset points")
        front, best = [], -1.0
        for x, y, _ in sorted(points):
            if y > best:
                front.append((x, y))
                best = y
        axis.plot([p[0] for p in front], [p[1] for p in front], linestyle="--", linewidth=1)
    axis.set_xscale("log")
    axis.set_xlabel("cost per 1,000 claims (USD, log scale)")
    axis.set_ylabel("accuracy")
    axis.set_title("Teams of two simulated models: accuracy against cost (dashed: Pareto front)")
    axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def main() -> None:
    labels = {
        **labels_for(ARGS.n, 0.5, ARGS.seed, prefix="test"),
        **labels_for(ARGS.pilot_n, 0.5, ARGS.seed + 1, prefix="pilot"),
    }
    said: dict[tuple[str, str], list[bool]] = {}
    rows = []
    with serving(labels, said) as urls, tempfile.TemporaryDirectory() as tmp:
        for name in ARGS.scenarios.split(","):
            folder = Path(tmp) / name
            folder.mkdir()
            rows += scenario(name, folder, urls, said)
    print(table(rows))
    print()
    for row in rows:
        print(f"{row['scenario']} / {row['team']}: {row['seconds']:.0f} s")
    if ARGS.plot:
        plot(rows, Path(ARGS.plot))
        print(f"plot: {ARGS.plot}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="claims each team debates")
    parser.add_argument(
        "--pilot-n", type=int, default=1000, help="labelled claims each cascade calibration is fitted on"
    )
    parser.add_argument(
        "--scenarios", default="cost,independent,shared", help="comma-separated: cost, independent, shared"
    )
    parser.add_argument(
        "--thresholds", default="0.9", help="the cascade's posterior thresholds, comma-separated (a row for each)"
    )
    parser.add_argument("--seed", type=int, default=0, help="which claims")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--plot", default="", help="write the accuracy-cost plot here")
    ARGS = parser.parse_args()
    main()
