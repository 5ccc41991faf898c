"""`debate eval`, `debate ablate` and `debate report`, added to the `debate` command by entry point."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError
from rich.console import Console
from rich.progress import TextColumn

from debate.api import Verifier
from debate.chain import PAPER_TRANSITION_RULES
from debate.cli import (
    add_command_group,
    add_verifier_arguments,
    examples,
    items_in_flight,
    progress_bar,
    verifier_config,
)
from debate.config import ClaimConfig, VerifierConfig
from debate.errors import UsageError
from debate.extras import require_extra
from debate.llm.cache import CACHE_FILE
from debate.llm.embedded import EMBEDDED_MODEL_NAME, last_call_rate, record_call_rate
from debate.monitoring import rag_monitoring
from debate.prompts import PROMPT_SETS
from debate.records import PredictionRecord, Record, read_records
from experiments.data import default_data_dir
from experiments.methods import METHODS
from experiments.runner import (
    RunSpec,
    check_run_dir,
    evaluate_run,
    items_for,
    markdown_table,
    open_run_dir,
    run_experiment,
    write_config,
)

__all__ = ["register"]

_err = Console(stderr=True)


PAPER_N = {"qa": 150, "dialogue": 150, "summarization": 50, "general": 150}
"""Default sample sizes: the paper's Table 1 (FactPrompts: all 50 responses / 233 claims); `general` is not in the
paper and gets QA's size."""


def register(sub: Any) -> None:
    """Add eval, ablate and report to the `debate` subcommands."""
    ev_sub = add_command_group(
        sub, "eval", dest="benchmark", metavar="BENCHMARK",
        help="run a benchmark (HaluEval, FactPrompts) with a method and its baselines",
    )  # fmt: skip
    halu = ev_sub.add_parser(
        "halueval", help="HaluEval qa / dialogue / summarization / general",
        epilog=examples(
            "debate eval halueval --task qa                       # 150 items, the paper's QA setting",
            "debate eval halueval --task summarization --method single",
            "debate eval halueval --task qa --n all --base-url http://localhost:8000/v1 --concurrency 16",
            "debate eval halueval --task qa --method halueval-judge --knowledge none",
        ),
    )  # fmt: skip
    halu.add_argument("--task", choices=["qa", "dialogue", "summarization", "general"], required=True,
                      help="which HaluEval file")  # fmt: skip
    _common(halu, n_help="items, or all (default: the paper's size: qa 150, dialogue 150, summarization 50; "
                         "general 150)")  # fmt: skip
    halu.set_defaults(handler=_eval)
    fact = ev_sub.add_parser(
        "factprompts", help="FactPrompts KB-QA (50 responses, 233 annotated claims)",
        epilog=examples("debate eval factprompts --level claim",
                        "debate eval factprompts --level response --search-backend local --collection wiki.jsonl"),
    )  # fmt: skip
    fact.add_argument("--level", choices=["claim", "response"], default="claim",
                      help="judge each annotated claim, or each response from its annotated claims")  # fmt: skip
    _common(fact, n_help="items, or all (default: all: 233 claims or 50 responses)", halueval=False)
    fact.set_defaults(handler=_eval, task="kbqa")

    ab_sub = add_command_group(sub, "ablate", dest="ablation", metavar="ABLATION",
                               help="the paper's ablations, with a table and plots (PNG and SVG)")  # fmt: skip
    tr = ab_sub.add_parser(
        "transitions", help="Table 4: the four transition rules on QA (min rounds 2)",
        epilog=examples("debate ablate transitions --n 80", "debate ablate transitions --n 150 --base-url URL"),
    )  # fmt: skip
    _common(tr, n_default=80, with_method=False, fixed={"chain": "true-to-skeptic", "min_rounds": 2})
    tr.set_defaults(handler=_ablate_transitions)
    mr = ab_sub.add_parser(
        "min-rounds", help="Figure 3: min rounds 0-3 on qa, dialogue and summarization",
        epilog=examples("debate ablate min-rounds --n 50", "debate ablate min-rounds --n 20 --tasks qa"),
    )  # fmt: skip
    _common(mr, with_method=False, fixed={"min_rounds": 0},
            n_help="items per task, or all (default: the paper's sizes, which Figure 3 reuses: qa 150, dialogue "
                   "150, summarization 50)")  # fmt: skip
    mr.add_argument("--tasks", nargs="+", choices=["qa", "dialogue", "summarization"],
                    default=["qa", "dialogue", "summarization"], help="tasks to run")  # fmt: skip
    mr.set_defaults(handler=_ablate_min_rounds)

    ps = ab_sub.add_parser(
        "prompt-set", help="the paper's prompt set against the tuned one (and any directory)",
        epilog=examples("debate ablate prompt-set --n 80", "debate ablate prompt-set --sets paper my-prompts/"),
    )  # fmt: skip
    _common(ps, n_default=80, with_method=False, fixed={"prompt_set": "paper"})
    ps.add_argument("--task", choices=["qa", "dialogue", "summarization"], default="qa", help="which HaluEval file")
    ps.add_argument("--sets", nargs="+", default=list(PROMPT_SETS), metavar="NAME|DIR",
                    help=f"prompt sets to compare (default: {' '.join(PROMPT_SETS)})")  # fmt: skip
    ps.set_defaults(handler=_ablate_prompt_sets)
    rp = ab_sub.add_parser(
        "replot", help="redraw an ablation's table.md and plots from its finished runs (no model calls)",
        epilog=examples("debate ablate replot runs/ablate-transitions",
                        "debate ablate replot results/embedded-paper/ablate-transitions"),
    )  # fmt: skip
    rp.add_argument("folder", type=Path, help="a folder made by `debate ablate transitions|min-rounds|prompt-set`")
    rp.set_defaults(handler=_ablate_replot)

    rep = sub.add_parser(
        "report", help="one table of several runs, with CIs (markdown, csv or json)",
        epilog=examples("debate report runs/*/", "debate report results/embedded-paper/2026*/ --format csv > runs.csv",
                        "debate report rag-results.jsonl       # average risk, high-risk share, citation figures"),
    )  # fmt: skip
    rep.add_argument("runs", nargs="+", type=Path,
                     help="run folders (unfinished ones are skipped with a note), or results logs (.jsonl of `debate "
                     "verify --input ... --output`): their RAG answers get seed 000's monitoring figures")  # fmt: skip
    rep.add_argument("--format", choices=["md", "csv", "json"], default="md", help="output format")
    rep.add_argument("--recompute", action="store_true",
                     help="first recompute each finished run's metrics.json and results.md from its results.jsonl "
                     "(no model calls; after a metrics change)")  # fmt: skip
    rep.set_defaults(handler=_report)


def _n(value: str) -> int | str:
    if value == "all":
        return value
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or all, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or all, got {value!r}")
    return n


def _common(
    parser: argparse.ArgumentParser, *, n_default: int | None = None, n_help: str | None = None,
    with_method: bool = True, halueval: bool = True, fixed: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    parser.add_argument("--n", type=_n, default=n_default, metavar="N|all",
                        help=n_help or f"items per run, or all (default: {n_default})")  # fmt: skip
    if with_method:
        parser.add_argument("--method", choices=list(METHODS), default="mcmad", help="the method to evaluate")
    if with_method and halueval:
        parser.add_argument(
            "--judge-knowledge", action="store_true",
            help="halueval-judge: give the judge the knowledge (HaluEval's own judge gets none for QA and "
            "dialogue); the run's name says so",
        )  # fmt: skip
    if halueval:
        parser.add_argument("--balanced", action="store_true",
                            help="exactly half hallucinated (qa/dialogue/summarization)")  # fmt: skip
        parser.add_argument(
            "--knowledge",
            choices=["given", "none"],
            default="given",
            help="qa/dialogue: give the knowledge as evidence (paper) or not (HaluEval's own script)",
        )
    parser.add_argument(
        "--data-dir", type=Path, default=None,
        help="folder with halueval/ and factool/ (default: DEBATE_DATA_DIR, else where `debate data fetch` installed "
        "it, else ../shared/data)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<timestamp>-<name>)")
    parser.add_argument("--runs-root", type=Path, default=Path("runs"), help="where run folders and the cache go")
    parser.add_argument("--no-cache", action="store_true", help="do not use the model-call cache")
    parser.add_argument(
        "--retry-failed", action=argparse.BooleanOptionalAction, default=True,
        help="on a re-run, redo items that failed for a transient reason (default: on)",
    )  # fmt: skip
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run folder that holds another configuration (default: refuse)")  # fmt: skip
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local processes (--workers) or Ray tasks (--shards)")  # fmt: skip
    parser.add_argument("--shards", type=int, default=2, help="Ray tasks (with --backend ray)")
    if not halueval:
        # FactPrompts comes with annotated claims: nothing is extracted.
        fixed = {**(fixed or {}), "claim_format": "sentence", "max_claims": ClaimConfig().max_claims}
    add_verifier_arguments(parser, fixed=fixed)


def _sample_size(args: argparse.Namespace) -> int | None:
    """--n as a RunSpec size: None for all; unset, the paper's size for the task (FactPrompts: all)."""
    n = args.n
    if n is None:
        halueval = getattr(args, "benchmark", "halueval") == "halueval"
        return PAPER_N.get(getattr(args, "task", "qa")) if halueval else None
    return None if n == "all" else int(n)


def _spec(args: argparse.Namespace, **overrides: Any) -> RunSpec:
    config: VerifierConfig = verifier_config(args)
    if not args.no_cache:
        config = config.model_copy(update={"call_cache": str(args.runs_root / ".cache" / CACHE_FILE)})
    values: dict[str, Any] = {
        "benchmark": getattr(args, "benchmark", "halueval"),
        "task": getattr(args, "task", "qa"),
        "level": getattr(args, "level", "response"),
        "n": _sample_size(args),
        "seed": args.seed or 0,
        "balanced": getattr(args, "balanced", False),
        "knowledge": getattr(args, "knowledge", "given"),
        "method": getattr(args, "method", "mcmad"),
        "judge_knowledge": getattr(args, "judge_knowledge", False),
        "data_dir": str(
            args.data_dir
            or default_data_dir("factprompts" if getattr(args, "benchmark", "") == "factprompts" else "halueval")
        ),
        "verifier": config,
    }
    values.update(overrides)
    if "debate" in values:
        debate = values.pop("debate")
        values["verifier"] = values["verifier"].model_copy(update={"debate": debate})
    return RunSpec.model_validate(values)


def _provenance(spec: RunSpec) -> Any:
    def build(verifier: Verifier, prompts: dict[str, str]) -> dict[str, Any]:
        meta = verifier.meta()
        return {
            "spec": spec.model_dump(mode="json"),
            "spec_digest": spec.digest(),
            "model": meta.model,
            "base_url": meta.base_url,
            "embedded": meta.embedded,
            "resolved_config": meta.config,
            "prompts": prompts,
            "seed": spec.seed,
            "git_commit": meta.git_commit,
            "package_version": meta.package_version,
            "created_at": datetime.now(UTC).isoformat(),
        }

    return build


def _announce(spec: RunSpec, run_dir: Path, embedded: bool) -> None:
    """What a run says once its folder exists: where, and on the embedded model how long it may take."""
    _err.print(f"[dim]run folder: {run_dir}[/]")
    if embedded:
        _announce_embedded(spec)


def _announce_embedded(spec: RunSpec) -> None:
    items = spec.n if spec.n is not None else sum(1 for _ in items_for(spec))
    debate = spec.verifier.debate
    calls = (1 + 3 * debate.min_rounds, 1 + 3 * max(debate.max_rounds, 1))
    rate = last_call_rate()
    if rate is None:
        when = "no call rate measured on this machine yet (2 cores: a few seconds a call)"
    else:
        low, high = (items * c / rate for c in calls)
        when = f"at the last measured {rate:.2f} calls/s, about {_duration(low)} to {_duration(high)}"
    _err.print(
        f"{items} items on the embedded {EMBEDDED_MODEL_NAME} ({calls[0]}-{calls[1]} model calls a claim): {when}; "
        "its verdicts are not the method's accuracy. --n 10 for a quick look, --base-url for a real model.",
        highlight=False,
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _run(spec: RunSpec, args: argparse.Namespace, *, out: Path | None = None) -> tuple[Path, dict[str, Any]]:
    run_dir = open_run_dir(spec, out=out if out is not None else args.out, runs_root=args.runs_root)
    if args.backend == "ray":
        require_extra("ray", "--backend ray")
        from experiments.ray_backend import run_with_ray

        config_path = check_run_dir(run_dir, spec, overwrite=args.overwrite)

        async def record_config() -> None:
            async with Verifier(config=spec.verifier) as verifier:
                if not config_path.exists():
                    write_config(config_path, _provenance(spec)(verifier, verifier.meta().prompts))
                _announce(spec, run_dir, verifier.embedded)

        asyncio.run(record_config())
        run_with_ray(spec, run_dir, shards=args.shards, concurrency=items_in_flight(args))
        return run_dir, evaluate_run(run_dir, spec)

    progress = progress_bar(TextColumn("{task.description}"), TextColumn("{task.fields[acc]}"))
    seen = {"n": 0, "correct": 0, "calls": 0, "embedded": 0}
    started = time.monotonic()

    def opened(run_dir: Path, embedded: bool) -> None:
        seen["embedded"] = int(embedded)
        _announce(spec, run_dir, embedded)

    with progress:
        bar = progress.add_task(spec.name(), total=spec.n, acc="")

        def advance(record: Record) -> None:
            seen["n"] += 1
            if isinstance(record, PredictionRecord):
                seen["calls"] += record.llm_calls
                seen["correct"] += int(record.pred_factual is not None and record.pred_factual == record.label_factual)
            progress.update(bar, advance=1, acc=f"acc {seen['correct'] / seen['n']:.3f}")

        try:
            metrics = asyncio.run(
                run_experiment(spec, run_dir=run_dir, concurrency=items_in_flight(args), provenance=_provenance(spec),
                               on_record=advance, retry_failed=args.retry_failed, overwrite=args.overwrite,
                               workers=args.workers, on_open=opened)
            )  # fmt: skip
        finally:
            if seen["embedded"]:
                record_call_rate(seen["calls"], time.monotonic() - started)
    return run_dir, metrics


def _eval(args: argparse.Namespace) -> int:
    spec = _spec(args)
    run_dir, _ = _run(spec, args)
    sys.stdout.write((run_dir / "results.md").read_text())
    return 0


Point = tuple[Any, dict[str, Any]]
"""An x value (a rule, a round count, a prompt set) and the run's metrics there."""

_PANELS = (("accuracy", "accuracy"), ("f1", "F1 (factual)"))


def _plot(folder: Path, stem: str, title: str, series: dict[str, list[Point]], *, xlabel: str,
          categorical: bool, model: str) -> list[Path]:  # fmt: skip
    """The ablation figure written as PNG and SVG; returns the paths."""
    fig = ablation_figure(title, series, xlabel=xlabel, categorical=categorical, model=model)
    written = []
    for suffix in ("png", "svg"):
        path = folder / f"{stem}.{suffix}"
        fig.savefig(path, dpi=120)
        written.append(path)
    return written


def ablation_figure(title: str, series: dict[str, list[Point]], *, xlabel: str, categorical: bool,
                    model: str) -> Any:  # fmt: skip
    """Accuracy and F1 side by side with 95% CIs; series are offset sideways so identical ones stay visible; the
    model-free baselines (length-only, majority-class) of each series' sample are reference lines, one line per
    height. A matplotlib Figure (the pyplot-free API: nothing global is left open)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    colours = [f"C{k}" for k in range(10)]
    xs_all = list(dict.fromkeys(p[0] for points in series.values() for p in points))
    position = {x: i for i, x in enumerate(xs_all)} if categorical else {x: float(x) for x in xs_all}
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
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, linestyle="-" if not categorical else "none",
                        color=colour, label=name)  # fmt: skip
            baselines = points[0][1].get("baselines", {})
            for baseline, style in (("length-only", "--"), ("majority-class", ":")):
                value = baselines.get(baseline, {}).get(metric)
                if value is not None:
                    tag = f"{baseline} ({name})" if len(series) > 1 else baseline
                    lines.setdefault(round(value, 9), []).append((tag, style, colour if len(series) > 1 else "grey"))
        for value, drawn in lines.items():
            # Baselines at the same height are one line with one label naming them all, not a line hiding another.
            _tag, style, colour = drawn[0]
            ax.axhline(value, color=colour if len(drawn) == 1 else "dimgrey", linestyle=style if len(drawn) == 1
                       else "-.", linewidth=1, label=" = ".join(t for t, _, _ in drawn))  # fmt: skip
        ax.set_xticks(list(position.values()), [str(x) for x in position])
        # Padded on every side, so a point at 0 or 1 (or at the first or last x) is drawn whole, not cut in half.
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(min(position.values()) - 0.5, max(position.values()) + 0.5)
        ax.set_xlabel(xlabel)
        ax.set_title(f"{label} (95% CI)")
        ax.grid(axis="y", alpha=0.3)
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


def _finish_ablation(folder: Path, kind: str, rows: list[tuple[str, dict[str, Any]]],
                     series: dict[str, list[Point]], last_run: Path, *, task: str = "") -> int:  # fmt: skip
    """An ablation's table.md (its runs, then the baselines its plots draw) and plots; prints the table."""
    layout = _LAYOUTS[kind]
    table = f"{layout['heading'].format(task=task)}\n\n" + markdown_table(rows + _baseline_rows(series))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    plots = _plot(folder, layout["stem"], layout["title"].format(task=task), series, xlabel=layout["xlabel"],
                  categorical=layout["categorical"], model=_model_of(last_run))  # fmt: skip
    sys.stdout.write(table + f"\nplots: {', '.join(map(str, plots))}\n")
    return 0


def _model_of(run_dir: Path) -> str:
    config = json.loads((run_dir / "config.json").read_text())
    return str(config.get("model", "?"))


def _ablation_dir(args: argparse.Namespace, kind: str) -> Path:
    folder: Path = args.out or args.runs_root / f"ablate-{kind}"
    return folder


_LAYOUTS: dict[str, dict[str, Any]] = {
    "transitions": {"heading": "# Transition rules on HaluEval QA (paper Table 4 layout)", "stem": "transitions",
                    "title": "Transition rules (HaluEval QA, min rounds 2)", "xlabel": "transition rule",
                    "categorical": True},
    "min-rounds": {"heading": "# Minimum debate rounds (paper Figure 3 layout)", "stem": "min_rounds",
                   "title": "Minimum debate rounds (true -> skeptic)", "xlabel": "minimum rounds",
                   "categorical": False},
    "prompt-set": {"heading": "# Prompt sets on HaluEval {task}", "stem": "prompt_sets",
                   "title": "Prompt sets (HaluEval {task})", "xlabel": "prompt set", "categorical": True},
}  # fmt: skip
"""Each ablation's table heading and plot: one place for the run and for `debate ablate replot`."""

_MIN_ROUNDS_RUN = re.compile(r"^(?P<task>qa|dialogue|summarization)-min(?P<rounds>\d+)$")


def _ablate_replot(args: argparse.Namespace) -> int:
    folder: Path = args.folder
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


def _ablate_transitions(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "transitions")
    rows: list[tuple[str, dict[str, Any]]] = []
    points: list[Point] = []
    for rule in PAPER_TRANSITION_RULES:
        debate = base.model_copy(update={"chain": rule, "min_rounds": 2, "max_rounds": max(base.max_rounds, 2)})
        spec = _spec(args, task="qa", debate=debate)
        run_dir, metrics = _run(spec, args, out=folder / rule)
        rows.append((rule, metrics))
        points.append((rule, metrics))
    return _finish_ablation(folder, "transitions", rows, {"mcmad": points}, run_dir)


def _ablate_prompt_sets(args: argparse.Namespace) -> int:
    folder = _ablation_dir(args, f"prompt-set-{args.task}")
    rows: list[tuple[str, dict[str, Any]]] = []
    points: list[Point] = []
    for prompt_set in args.sets:
        spec = _spec(args, task=args.task)
        spec = spec.model_copy(update={"verifier": spec.verifier.model_copy(update={"prompt_set": prompt_set})})
        run_dir, metrics = _run(spec, args, out=folder / Path(prompt_set).name)
        rows.append((f"prompt set {prompt_set}", metrics))
        points.append((Path(prompt_set).name, metrics))
    return _finish_ablation(folder, "prompt-set", rows, {"mcmad": points}, run_dir, task=args.task)


def _ablate_min_rounds(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "min-rounds")
    rows: list[tuple[str, dict[str, Any]]] = []
    series: dict[str, list[Point]] = {}
    for task in args.tasks:
        points: list[Point] = []
        for rounds in range(4):
            debate = base.model_copy(update={"min_rounds": rounds, "max_rounds": max(base.max_rounds, rounds)})
            n = PAPER_N[task] if args.n is None else None if args.n == "all" else int(args.n)
            spec = _spec(args, task=task, debate=debate, n=n)
            run_dir, metrics = _run(spec, args, out=folder / f"{task}-min{rounds}")
            rows.append((f"{task} min_rounds={rounds}", metrics))
            points.append((rounds, metrics))
        series[task] = points
    return _finish_ablation(folder, "min-rounds", rows, series, run_dir)


def _report(args: argparse.Namespace) -> int:
    logs = [path for path in args.runs if path.is_file()]
    folders = [path for path in args.runs if not path.is_file()]
    if args.recompute:
        for run in folders:
            if (run / "metrics.json").is_file() and (run / "config.json").is_file():
                evaluate_run(run, _recorded_spec(json.loads((run / "config.json").read_text())["spec"]))
    rows = report_rows(folders, skipped=lambda run, why: _err.print(f"[yellow]skipped[/] {run}: {why}"))
    monitoring = [{"log": str(log), **rag_monitoring(_records(log)).model_dump()} for log in logs]
    if not rows and not monitoring:
        raise UsageError("no finished run among the folders given (each needs config.json and metrics.json), and no "
                         "results log (a .jsonl file of `debate verify --input ... --output`)")  # fmt: skip
    flat = [{k: v for k, v in row.items() if k != "metrics"} for row in rows]
    if args.format == "json":
        shown: Any = {"runs": flat, "rag_monitoring": monitoring} if flat and monitoring else flat or monitoring
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return 0
    for table in (flat, monitoring):
        if not table:
            continue
        if args.format == "csv":
            writer = csv.DictWriter(sys.stdout, fieldnames=list(table[0]), lineterminator="\n")
            writer.writeheader()
            for row in table:
                writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})
        elif table is flat:
            sys.stdout.write(markdown_table([(_label(row), row["metrics"]) for row in rows]))
        else:
            sys.stdout.write(_monitoring_table(monitoring))
    return 0


def _records(log: Path) -> list[Record]:
    try:
        return read_records(log)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{log}: cannot read it as a results log ({exc})") from exc


_MONITORING = (
    ("answers", "answers"), ("average_risk_score", "avg risk score"), ("high_risk_share", "high-risk share"),
    ("invalid_citation_frequency", "with invalid citations"), ("invalid_citations_per_answer", "invalid / answer"),
    ("uncited_frequency", "with uncited sentences"), ("uncited_sentences_per_answer", "uncited / answer"),
    ("average_judge_risk", "avg judge risk"), ("judged", "judged"),
)  # fmt: skip


def _monitoring_table(rows: list[dict[str, Any]]) -> str:
    """Seed 000's monitoring figures, one row per results log."""

    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["\nRAG monitoring (seed 000: rules and judge over each log's RAG answers)\n",
             "| log | " + " | ".join(title for _, title in _MONITORING) + " |",
             "|---" * (len(_MONITORING) + 1) + "|"]  # fmt: skip
    lines += [f"| {row['log']} | " + " | ".join(cell(row[key]) for key, _ in _MONITORING) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _variant(spec: dict[str, Any]) -> str:
    """What sets a run apart from the paper's defaults (prompt set, chain, minimum rounds), for its label."""
    verifier, defaults = spec.get("verifier", {}), VerifierConfig()
    debate = verifier.get("debate", {})
    prompt_set = verifier.get("prompt_set", defaults.prompt_set)
    parts = [
        f"prompts {prompt_set}" if prompt_set != defaults.prompt_set else "",
        f"chain {debate['chain']}" if debate.get("chain", defaults.debate.chain) != defaults.debate.chain else "",
        f"min rounds {debate['min_rounds']}"
        if debate.get("min_rounds", defaults.debate.min_rounds) != defaults.debate.min_rounds else "",
    ]  # fmt: skip
    shown = ", ".join(p for p in parts if p)
    return f" ({shown})" if shown else ""


def _recorded_spec(recorded: dict[str, Any]) -> RunSpec:
    """A run's recorded spec, for re-scoring it. Settings an older version recorded and this one no longer has are
    dropped (they cannot change the metrics, which need only the results and the sample); anything else invalid
    is an error."""
    for _ in range(50):
        try:
            return RunSpec.model_validate(recorded)
        except ValidationError as exc:
            extra = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if not extra or len(extra) != len(exc.errors()):
                raise UsageError(f"run spec cannot be read: {exc.errors()[0]['msg']}") from exc
            for loc in extra:
                parent: Any = recorded
                for key in loc[:-1]:
                    parent = parent[key]
                parent.pop(loc[-1], None)
    raise UsageError("run spec cannot be read")


def _label(row: dict[str, Any]) -> str:
    parts = [row["setting"], row["method"]]
    if row["model"]:
        parts.append(f"{row['model']} @ {row['endpoint']}")
    return " · ".join(parts)


def report_rows(runs: list[Path], *, skipped: Callable[[Path, str], None]) -> list[dict[str, Any]]:
    """One row per run, grouped by setting (benchmark, task, knowledge, sample), each setting followed by its
    model-free baselines once: runs of the same setting share one sample and so the same baseline figures."""
    by_setting: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    baselines: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        metrics_path, config_path = run / "metrics.json", run / "config.json"
        if not config_path.is_file():
            skipped(run, "not a run folder (no config.json)")
            continue
        if not metrics_path.is_file():
            skipped(run, "not finished (no metrics.json); re-run its command to finish it")
            continue
        metrics = json.loads(metrics_path.read_text())
        config = json.loads(config_path.read_text())
        spec = config["spec"]
        what = spec["task"] if spec["benchmark"] == "halueval" else f"{spec['level']}-level"
        if spec["benchmark"] == "factprompts" and not spec.get("verifier", {}).get("search"):
            what += " (no search: knowledge-free)"
        if spec["task"] in ("qa", "dialogue"):
            what += f" (knowledge {spec['knowledge']})"
        setting = f"{spec['benchmark']} {what}"
        key = (setting, metrics["n"], spec.get("seed"), spec.get("balanced"), spec.get("data_dir"))
        endpoint = "embedded" if config.get("embedded") else (urlparse(config.get("base_url") or "").netloc or "?")
        row = {"setting": setting, "method": spec["method"] + _variant(spec), "model": config.get("model", "?"),
               "endpoint": endpoint,
               "run": str(run), **_flat(metrics), "metrics": metrics}  # fmt: skip
        by_setting.setdefault(key, []).append(row)
        for name, baseline in metrics.get("baselines", {}).items():
            if name != "tuning":
                baselines.setdefault(key, {}).setdefault(name, baseline)
    rows: list[dict[str, Any]] = []
    for key, runs_of_setting in by_setting.items():
        rows += runs_of_setting
        for name, baseline in baselines.get(key, {}).items():
            rows.append({"setting": key[0], "method": name, "model": "", "endpoint": "", "run": "",
                         **_flat(baseline), "metrics": baseline})  # fmt: skip
    return rows


_COLUMNS = ("n", "accuracy", "precision", "recall", "f1", "f1_hallucination", "auroc", "unverifiable",
            "llm_calls_per_item")  # fmt: skip


def _flat(metrics: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name in _COLUMNS:
        flat[name] = metrics.get(name)
        ci = metrics.get(f"{name}_ci95")
        if name not in ("n", "unverifiable", "llm_calls_per_item"):
            flat[f"{name}_ci95"] = list(ci) if ci else None
    return flat
