"""`debate eval`, `debate ablate` and `debate report`, added to the `debate` command by entry point."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import TextColumn

from debate.api import Verifier
from debate.chain import PAPER_TRANSITION_RULES
from debate.cli import add_verifier_arguments, items_in_flight, progress_bar, verifier_config
from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.llm.cache import CACHE_FILE
from debate.prompts import PROMPT_SETS
from experiments.data import default_data_dir
from experiments.methods import METHODS
from experiments.runner import RunSpec, check_run_dir, evaluate_run, markdown_table, open_run_dir, run_experiment

__all__ = ["register"]

_err = Console(stderr=True)


def register(sub: Any) -> None:
    """Add eval, ablate and report to the `debate` subcommands."""
    ev = sub.add_parser("eval", help="run a benchmark (HaluEval, FactPrompts) with a method and its baselines")
    ev_sub = ev.add_subparsers(dest="benchmark", required=True, parser_class=sub._parser_class)
    halu = ev_sub.add_parser("halueval", help="HaluEval qa / dialogue / summarization / general")
    halu.add_argument("--task", choices=["qa", "dialogue", "summarization", "general"], required=True)
    _common(halu)
    halu.set_defaults(handler=_eval)
    fact = ev_sub.add_parser("factprompts", help="FactPrompts KB-QA (50 responses, 233 annotated claims)")
    fact.add_argument("--level", choices=["claim", "response"], default="claim")
    _common(fact)
    fact.set_defaults(handler=_eval, task="kbqa")

    ab = sub.add_parser("ablate", help="the paper's ablations, with a table and a PNG plot")
    ab_sub = ab.add_subparsers(dest="ablation", required=True, parser_class=sub._parser_class)
    tr = ab_sub.add_parser("transitions", help="Table 4: the four transition rules on QA (min rounds 2)")
    _common(tr, n_default=80, with_method=False)
    tr.set_defaults(handler=_ablate_transitions)
    mr = ab_sub.add_parser("min-rounds", help="Figure 3: min rounds 0-3 on qa, dialogue and summarization")
    _common(mr, n_default=50, with_method=False)
    mr.add_argument("--tasks", nargs="+", choices=["qa", "dialogue", "summarization"],
                    default=["qa", "dialogue", "summarization"])  # fmt: skip
    mr.set_defaults(handler=_ablate_min_rounds)

    ps = ab_sub.add_parser("prompt-set", help="the paper's prompt set against the tuned one (and any directory)")
    _common(ps, n_default=80, with_method=False)
    ps.add_argument("--task", choices=["qa", "dialogue", "summarization"], default="qa")
    ps.add_argument("--sets", nargs="+", default=list(PROMPT_SETS), metavar="NAME|DIR",
                    help=f"prompt sets to compare (default: {' '.join(PROMPT_SETS)})")  # fmt: skip
    ps.set_defaults(handler=_ablate_prompt_sets)

    rep = sub.add_parser("report", help="a combined markdown table of runs, with CIs")
    rep.add_argument("runs", nargs="+", type=Path, help="run folders")
    rep.set_defaults(handler=_report)


def _common(parser: argparse.ArgumentParser, *, n_default: int | None = None, with_method: bool = True) -> None:
    parser.add_argument("--n", type=int, default=n_default, help="items (default: all, or the ablation's size)")
    if with_method:
        parser.add_argument("--method", choices=list(METHODS), default="mcmad")
        parser.add_argument(
            "--judge-knowledge", action="store_true",
            help="halueval-judge: give the judge the knowledge (HaluEval's own judge gets none for QA and "
            "dialogue); the run's name says so",
        )  # fmt: skip
    parser.add_argument("--balanced", action="store_true", help="exactly half hallucinated (qa/dialogue/summarization)")
    parser.add_argument(
        "--knowledge",
        choices=["given", "none"],
        default="given",
        help="qa/dialogue: give the knowledge as evidence (paper) or not (HaluEval's own script)",
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="folder with halueval/ and factool/")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<timestamp>-<name>)")
    parser.add_argument("--runs-root", type=Path, default=Path("runs"))
    parser.add_argument("--no-cache", action="store_true", help="do not use the model-call cache")
    parser.add_argument(
        "--retry-failed", action=argparse.BooleanOptionalAction, default=True,
        help="on a re-run, redo items that failed for a transient reason (default: on)",
    )  # fmt: skip
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run folder that holds another configuration (default: refuse)")  # fmt: skip
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--shards", type=int, default=2, help="Ray tasks (with --backend ray)")
    add_verifier_arguments(parser)


def _spec(args: argparse.Namespace, **overrides: Any) -> RunSpec:
    config: VerifierConfig = verifier_config(args)
    if not args.no_cache:
        config = config.model_copy(update={"call_cache": str(args.runs_root / ".cache" / CACHE_FILE)})
    values: dict[str, Any] = {
        "benchmark": getattr(args, "benchmark", "halueval"),
        "task": getattr(args, "task", "qa"),
        "level": getattr(args, "level", "response"),
        "n": args.n,
        "seed": args.seed or 0,
        "balanced": args.balanced,
        "knowledge": args.knowledge,
        "method": getattr(args, "method", "mcmad"),
        "judge_knowledge": getattr(args, "judge_knowledge", False),
        "data_dir": str(args.data_dir or default_data_dir()),
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


def _run(spec: RunSpec, args: argparse.Namespace, *, out: Path | None = None) -> tuple[Path, dict[str, Any]]:
    run_dir = open_run_dir(spec, out=out if out is not None else args.out, runs_root=args.runs_root)
    _err.print(f"[dim]run folder: {run_dir}[/]")
    if args.backend == "ray":
        from experiments.ray_backend import run_with_ray

        config_path = check_run_dir(run_dir, spec, overwrite=args.overwrite)

        async def record_config() -> None:
            if config_path.exists():
                return
            async with Verifier(config=spec.verifier) as verifier:
                config_path.write_text(
                    json.dumps(_provenance(spec)(verifier, verifier.meta().prompts), indent=2) + "\n"
                )

        asyncio.run(record_config())
        run_with_ray(spec, run_dir, shards=args.shards, concurrency=items_in_flight(args))
        return run_dir, evaluate_run(run_dir, spec)

    progress = progress_bar(TextColumn("{task.description}"), TextColumn("{task.fields[acc]}"))
    seen = {"n": 0, "correct": 0}
    with progress:
        bar = progress.add_task(spec.name(), total=spec.n, acc="")

        def advance(record: dict[str, Any]) -> None:
            seen["n"] += 1
            seen["correct"] += int(
                record["pred_factual"] is not None and record["pred_factual"] == record["label_factual"]
            )
            progress.update(bar, advance=1, acc=f"acc {seen['correct'] / seen['n']:.3f}")

        metrics = asyncio.run(
            run_experiment(spec, run_dir=run_dir, concurrency=items_in_flight(args), provenance=_provenance(spec),
                           on_record=advance, retry_failed=args.retry_failed, overwrite=args.overwrite,
                           workers=args.workers)
        )  # fmt: skip
    return run_dir, metrics


def _eval(args: argparse.Namespace) -> int:
    spec = _spec(args)
    run_dir, _ = _run(spec, args)
    sys.stdout.write((run_dir / "results.md").read_text())
    return 0


def _plot(path: Path, title: str, series: dict[str, list[tuple[Any, float, tuple[float, float] | None]]],
          *, bars: bool, xlabel: str) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, points in series.items():
        xs = [str(p[0]) if bars else p[0] for p in points]
        ys = [p[1] for p in points]
        errs = [[y - (p[2][0] if p[2] else y) for y, p in zip(ys, points, strict=True)],
                [(p[2][1] if p[2] else y) - y for y, p in zip(ys, points, strict=True)]]  # fmt: skip
        if bars:
            ax.bar(xs, ys, yerr=errs, capsize=4, color="#4c72b0")
        else:
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=label)
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_title(title)
    if not bars:
        ax.legend()
        ax.set_xticks(sorted({p[0] for points in series.values() for p in points}))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _ablation_dir(args: argparse.Namespace, kind: str) -> Path:
    folder: Path = args.out or args.runs_root / f"ablate-{kind}"
    return folder


def _ablate_transitions(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "transitions")
    rows: list[tuple[str, dict[str, Any]]] = []
    points = []
    for rule in PAPER_TRANSITION_RULES:
        debate = base.model_copy(update={"chain": rule, "min_rounds": 2, "max_rounds": max(base.max_rounds, 2)})
        spec = _spec(args, task="qa", debate=debate)
        _, metrics = _run(spec, args, out=folder / rule)
        rows.append((rule, metrics))
        points.append((rule, metrics["accuracy"], metrics.get("accuracy_ci95")))
    table = "# Transition rules on HaluEval QA (paper Table 4 layout)\n\n" + markdown_table(rows)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    _plot(folder / "transitions.png", "Transition rules (QA, min rounds 2)", {"accuracy": points}, bars=True,
          xlabel="transition rule")  # fmt: skip
    sys.stdout.write(table + f"\nplot: {folder / 'transitions.png'}\n")
    return 0


def _ablate_prompt_sets(args: argparse.Namespace) -> int:
    folder = _ablation_dir(args, f"prompt-set-{args.task}")
    rows: list[tuple[str, dict[str, Any]]] = []
    points = []
    for prompt_set in args.sets:
        spec = _spec(args, task=args.task)
        spec = spec.model_copy(update={"verifier": spec.verifier.model_copy(update={"prompt_set": prompt_set})})
        _, metrics = _run(spec, args, out=folder / Path(prompt_set).name)
        rows.append((f"prompt set {prompt_set}", metrics))
        points.append((Path(prompt_set).name, metrics["accuracy"], metrics.get("accuracy_ci95")))
    table = f"# Prompt sets on HaluEval {args.task}\n\n" + markdown_table(rows)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    _plot(folder / "prompt_sets.png", f"Prompt sets ({args.task})", {"accuracy": points}, bars=True,
          xlabel="prompt set")  # fmt: skip
    sys.stdout.write(table + f"\nplot: {folder / 'prompt_sets.png'}\n")
    return 0


def _ablate_min_rounds(args: argparse.Namespace) -> int:
    base = verifier_config(args).debate
    folder = _ablation_dir(args, "min-rounds")
    rows, series = [], {}
    for task in args.tasks:
        points = []
        for rounds in range(4):
            debate = base.model_copy(update={"min_rounds": rounds, "max_rounds": max(base.max_rounds, rounds)})
            spec = _spec(args, task=task, debate=debate)
            _, metrics = _run(spec, args, out=folder / f"{task}-min{rounds}")
            rows.append((f"{task} min_rounds={rounds}", metrics))
            points.append((rounds, metrics["accuracy"], metrics.get("accuracy_ci95")))
        series[task] = points
    table = "# Minimum debate rounds (paper Figure 3 layout)\n\n" + markdown_table(rows)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    _plot(folder / "min_rounds.png", "Accuracy by minimum rounds", series, bars=False, xlabel="minimum rounds")
    sys.stdout.write(table + f"\nplot: {folder / 'min_rounds.png'}\n")
    return 0


def _report(args: argparse.Namespace) -> int:
    rows: list[tuple[str, dict[str, Any]]] = []
    for run in args.runs:
        metrics_path, config_path = run / "metrics.json", run / "config.json"
        if not metrics_path.is_file() or not config_path.is_file():
            raise UsageError(f"{run}: not a finished run folder (needs config.json and metrics.json)")
        metrics = json.loads(metrics_path.read_text())
        config = json.loads(config_path.read_text())
        spec = config["spec"]
        what = spec["task"] if spec["benchmark"] == "halueval" else f"{spec['level']}-level"
        if spec["task"] in ("qa", "dialogue"):
            what += f" (knowledge {spec['knowledge']})"
        rows.append((f"{spec['benchmark']} {what} · {spec['method']} · {config['model']}", metrics))
        for name, baseline in metrics.get("baselines", {}).items():
            if name != "tuning":
                rows.append((f"{spec['benchmark']} {what} · {name}", baseline))
    sys.stdout.write(markdown_table(rows))
    return 0
