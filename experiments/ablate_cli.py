"""`debate ablate`: the paper's ablations (Table 4, Figure 3, the prompt sets), each a folder of runs with a table
and plots."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from debate.cli import (
    output_folder,
    verifier_config,
)
from debate.engine import PAPER_TRANSITION_RULES
from debate.errors import UsageError
from experiments.cli_common import (
    PAPER_N,
    run_one,
    run_spec,
)
from experiments.tables import markdown_table

__all__ = ["Point", "ablate_min_rounds", "ablate_prompt_sets", "ablate_replot", "ablate_transitions", "ablation_figure"]

Point = tuple[Any, dict[str, Any]]
"""An x value (a rule, a round count, a prompt set) and the run's metrics there."""


_PANELS = (("accuracy", "accuracy"), ("f1", "F1 (factual)"))


def _plot(
    folder: Path, stem: str, title: str, series: dict[str, list[Point]], *, xlabel: str, categorical: bool, model: str
) -> list[Path]:
    """The ablation figure written as PNG and SVG; returns the paths."""
    fig = ablation_figure(title, series, xlabel=xlabel, categorical=categorical, model=model)
    written = []
    for suffix in ("png", "svg"):
        path = folder / f"{stem}.{suffix}"
        fig.savefig(path, dpi=120)
        written.append(path)
    return written


def ablation_figure(title: str, series: dict[str, list[Point]], *, xlabel: str, categorical: bool, model: str) -> Any:
    """Accuracy and F1 side by side with 95% CIs; series are offset sideways so identical ones stay visible; the
    model-free baselines (length-only, majority-class) of each series' sample are reference lines, one line per
    height. A matplotlib Figure (the pyplot-free API: nothing global is left open)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    colours = [f"C{k}" for k in range(10)]
    xs_all = list(dict.fromkeys(p[0] for points in series.values() for p in points))
    position = {x: float(i) for i, x in enumerate(xs_all)} if categorical else {x: float(x) for x in xs_all}
    width = 0.5 / max(len(series), 1)
    ns = sorted({int(m["n"]) for points in series.values() for _, m in points})
    for ax, (metric, label) in zip(axes, _PANELS, strict=True):
        lines: dict[float, list[tuple[str, str, str]]] = {}
        for i, (name, points) in enumerate(series.items()):
            colour = colours[i % len(colours)]
            offset = (i - (len(series) - 1) / 2) * width
            xs = [position[x] + offset for x, _ in points]
            ys = [m[metric] for _, m in points]
            cis = [m.get(f"{metric}_ci95") or (y, y) for (_, m), y in zip(points, ys, strict=True)]
            errs = [
                [y - lo for y, (lo, _) in zip(ys, cis, strict=True)],
                [hi - y for y, (_, hi) in zip(ys, cis, strict=True)],
            ]
            ax.errorbar(
                xs,
                ys,
                yerr=errs,
                marker="o",
                capsize=3,
                linestyle="-" if not categorical else "none",
                color=colour,
                label=name,
            )
            baselines = points[0][1].get("baselines", {})
            for baseline, style in (("length-only", "--"), ("majority-class", ":")):
                value = baselines.get(baseline, {}).get(metric)
                if value is not None:
                    tag = f"{baseline} ({name})" if len(series) > 1 else baseline
                    lines.setdefault(round(value, 9), []).append((tag, style, colour if len(series) > 1 else "grey"))
        _finish_panel(ax, lines, position, xlabel=xlabel, title=f"{label} (95% CI)")
    axes[0].set_ylabel("score")
    axes[1].legend(fontsize=7, loc="best")
    n_text = f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}-{ns[-1]}"
    fig.suptitle(f"{title}\n{n_text} per point · model {model}", fontsize=10)
    fig.tight_layout()
    return fig


def _baseline_rows(series: dict[str, list[Point]]) -> list[tuple[str, dict[str, Any]]]:
    """Each series' model-free baselines as table rows, once per series (its runs share one sample)."""
    rows = []
    for name, points in series.items():
        for baseline, figures in points[0][1].get("baselines", {}).items():
            if baseline != "tuning":
                rows.append((f"{name} {baseline}" if len(series) > 1 else baseline, figures))
    return rows


def _finish_ablation(
    folder: Path,
    kind: str,
    rows: list[tuple[str, dict[str, Any]]],
    series: dict[str, list[Point]],
    last_run: Path,
    *,
    task: str = "",
) -> int:
    """An ablation's table.md (its runs, then the baselines its plots draw) and plots; prints the table."""
    layout = _LAYOUTS[kind]
    table = f"{layout['heading'].format(task=task)}\n\n" + markdown_table(rows + _baseline_rows(series))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    plots = _plot(
        folder,
        layout["stem"],
        layout["title"].format(task=task),
        series,
        xlabel=layout["xlabel"],
        categorical=layout["categorical"],
        model=_model_of(last_run),
    )
    sys.stdout.write(table + f"\nplots: {', '.join(map(str, plots))}\n")
    return 0


_LAYOUTS: dict[str, dict[str, Any]] = {
    "transitions": {
        "heading": "# Transition rules on HaluEval QA (paper Table 4 layout)",
        "stem": "transitions",
        "title": "Transition rules (HaluEval QA, min rounds 2)",
        "xlabel": "transition rule",
        "categorical": True,
    },
    "min-rounds": {
        "heading": "# Minimum debate rounds (paper Figure 3 layout)",
        "stem": "min_rounds",
        "title": "Minimum debate rounds (true -> skeptic)",
        "xlabel": "minimum rounds",
        "categorical": False,
    },
    "prompt-set": {
        "heading": "# Prompt sets on HaluEval {task}",
        "stem": "prompt_sets",
        "title": "Prompt sets (HaluEval {task})",
        "xlabel": "prompt set",
        "categorical": True,
    },
}
"""Each ablation's table heading and plot: one place for the run and for `debate ablate replot`."""


def _model_of(run_dir: Path) -> str:
    config = json.loads((run_dir / "config.json").read_text())
    return str(config.get("model", "?"))


def _ablation_dir(args: argparse.Namespace, kind: str) -> Path:
    folder: Path = output_folder(args.out or args.runs_root / f"ablate-{kind}", "--out")
    return folder


_MIN_ROUNDS_RUN = re.compile(r"^(?P<task>qa|dialogue|summarization)-min(?P<rounds>\d+)$")


def ablate_replot(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    if (folder / "teams.json").is_file():
        from experiments.ablate_teams import replot_teams

        return replot_teams(folder)
    runs = sorted(d for d in folder.iterdir() if (d / "metrics.json").is_file()) if folder.is_dir() else []
    if not runs:
        raise UsageError(f"{folder}: no finished runs (sub-folders with metrics.json); is it an ablation folder?")
    metrics = {d.name: json.loads((d / "metrics.json").read_text()) for d in runs}
    rows: list[tuple[str, dict[str, Any]]] = []
    series: dict[str, list[Point]] = {}
    if set(metrics) <= set(PAPER_TRANSITION_RULES):
        kind, task = "transitions", "qa"
        for rule in (r for r in PAPER_TRANSITION_RULES if r in metrics):
            rows.append((rule, metrics[rule]))
            series.setdefault("mcmad", []).append((rule, metrics[rule]))
    elif all(_MIN_ROUNDS_RUN.match(name) for name in metrics):
        kind, task = "min-rounds", ""
        ordered = sorted(metrics, key=lambda n: (n.split("-")[0], int(n.rsplit("min", 1)[1])))
        for name in ordered:
            found = _MIN_ROUNDS_RUN.match(name)
            assert found is not None
            rows.append((f"{found['task']} min_rounds={found['rounds']}", metrics[name]))
            series.setdefault(found["task"], []).append((int(found["rounds"]), metrics[name]))
    else:
        kind = "prompt-set"
        task = json.loads((runs[0] / "config.json").read_text())["spec"]["task"]
        for name, figures in metrics.items():
            rows.append((f"prompt set {name}", figures))
            series.setdefault("mcmad", []).append((name, figures))
    return _finish_ablation(folder, kind, rows, series, runs[-1], task=task)


def ablate_transitions(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "transitions")
    rows: list[tuple[str, dict[str, Any]]] = []
    points: list[Point] = []
    for rule in PAPER_TRANSITION_RULES:
        debate = base.model_copy(update={"chain": rule, "min_rounds": 2, "max_rounds": max(base.max_rounds, 2)})
        spec = run_spec(args, task="qa", debate=debate)
        run_dir, metrics = run_one(spec, args, out=folder / rule)
        rows.append((rule, metrics))
        points.append((rule, metrics))
    return _finish_ablation(folder, "transitions", rows, {"mcmad": points}, run_dir)


def ablate_prompt_sets(args: argparse.Namespace) -> int:
    folder = _ablation_dir(args, f"prompt-set-{args.task}")
    rows: list[tuple[str, dict[str, Any]]] = []
    points: list[Point] = []
    for prompt_set in args.sets:
        spec = run_spec(args, task=args.task)
        spec = spec.model_copy(update={"verifier": spec.verifier.model_copy(update={"prompt_set": prompt_set})})
        run_dir, metrics = run_one(spec, args, out=folder / Path(prompt_set).name)
        rows.append((f"prompt set {prompt_set}", metrics))
        points.append((Path(prompt_set).name, metrics))
    return _finish_ablation(folder, "prompt-set", rows, {"mcmad": points}, run_dir, task=args.task)


def ablate_min_rounds(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "min-rounds")
    rows: list[tuple[str, dict[str, Any]]] = []
    series: dict[str, list[Point]] = {}
    for task in args.tasks:
        points: list[Point] = []
        for rounds in range(4):
            debate = base.model_copy(update={"min_rounds": rounds, "max_rounds": max(base.max_rounds, rounds)})
            n = PAPER_N[task] if args.n is None else None if args.n == "all" else int(args.n)
            spec = run_spec(args, task=task, debate=debate, n=n)
            run_dir, metrics = run_one(spec, args, out=folder / f"{task}-min{rounds}")
            rows.append((f"{task} min_rounds={rounds}", metrics))
            points.append((rounds, metrics))
        series[task] = points
    return _finish_ablation(folder, "min-rounds", rows, series, run_dir)


def _finish_panel(
    ax: Any, lines: dict[float, list[tuple[str, str, str]]], position: dict[Any, float], *, xlabel: str, title: str
) -> None:
    """The baselines' reference lines, the ticks and the limits of one panel."""
    for value, drawn in lines.items():
        # Baselines at the same height are one line with one label naming them all, not a line hiding another.
        _tag, style, colour = drawn[0]
        ax.axhline(
            value,
            color=colour if len(drawn) == 1 else "dimgrey",
            linestyle=style if len(drawn) == 1 else "-.",
            linewidth=1,
            label=" = ".join(t for t, _, _ in drawn),
        )
    ax.set_xticks(list(position.values()), [str(x) for x in position])
    # Padded on every side, so a point at 0 or 1 (or at the first or last x) is drawn whole, not cut in half.
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(min(position.values()) - 0.5, max(position.values()) + 0.5)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
