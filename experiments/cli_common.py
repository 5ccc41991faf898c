"""What `debate eval` and `debate ablate` share: the options of a run, its RunSpec, and running one with a
progress bar and a line saying where its results are."""

from __future__ import annotations

import argparse
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.progress import TextColumn

from debate.cli import (
    add_verifier_arguments,
    items_in_flight,
    output_folder,
    progress_bar,
    verifier_config,
)
from debate.cli.conventions import err
from debate.cli.interrupts import kept_records, on_interrupt
from debate.concurrency import run_blocking
from debate.config import ClaimConfig, VerifierConfig
from debate.extras import require_extra
from debate.llm import CACHE_FILE, EMBEDDED_MODEL_NAME, last_call_rate, record_call_rate
from debate.results import PredictionRecord, Record
from experiments.data import default_data_dir, halueval_records
from experiments.methods import METHODS

if TYPE_CHECKING:
    from debate.pipeline import Verifier
from experiments.runner import (
    RunSpec,
    check_run_dir,
    evaluate_run,
    items_for,
    open_run_dir,
    run_experiment,
    write_config,
)

__all__ = [
    "PAPER_N",
    "add_run_arguments",
    "announce",
    "announce_embedded",
    "duration",
    "n_or_all",
    "provenance_of",
    "run_one",
    "run_spec",
    "sample_size",
]

log = logging.getLogger("experiments")

PAPER_N = {"qa": 150, "dialogue": 150, "summarization": 50, "general": 150}
"""Default sample sizes: the paper's Table 1 (FactPrompts: all 50 responses / 233 claims); `general` is not in the
paper and gets QA's size."""


def n_or_all(value: str) -> int | str:
    if value == "all":
        return value
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or all, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or all, got {value!r}")
    return n


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    n_default: int | None = None,
    n_help: str | None = None,
    with_method: bool = True,
    halueval: bool = True,
    fixed: dict[str, Any] | None = None,
) -> None:
    parser.add_argument(
        "--n",
        type=n_or_all,
        default=n_default,
        metavar="N|all",
        help=n_help or f"items per run, or all (default: {n_default})",
    )
    if with_method:
        parser.add_argument("--method", choices=list(METHODS), default="mcmad", help="the method to evaluate")
    if with_method and halueval:
        parser.add_argument(
            "--judge-knowledge",
            action="store_true",
            help="halueval-judge: give the judge the knowledge (HaluEval's own judge gets none for QA and "
            "dialogue); the run's name says so",
        )
    if halueval:
        parser.add_argument(
            "--balanced", action="store_true", help="exactly half hallucinated (qa/dialogue/summarization)"
        )
        parser.add_argument(
            "--knowledge",
            choices=["given", "none"],
            default="given",
            help="qa/dialogue: give the knowledge as evidence (paper) or not (HaluEval's own script)",
        )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with halueval/ and factool/ (default: DEBATE_DATA_DIR, else where `debate data fetch` installed "
        "it, else ../shared/data)",
    )
    _add_run_folder_arguments(parser)
    if not halueval:
        # FactPrompts comes with annotated claims: nothing is extracted.
        fixed = {**(fixed or {}), "claims.format": "sentence", "claims.max_claims": ClaimConfig().max_claims}
    add_verifier_arguments(parser, fixed=fixed)


def sample_size(args: argparse.Namespace) -> int | None:
    """--n as a RunSpec size: None for all; unset, the paper's size for the task (FactPrompts: all)."""
    n = args.n
    if n is None:
        halueval = getattr(args, "benchmark", "halueval") == "halueval"
        return PAPER_N.get(getattr(args, "task", "qa")) if halueval else None
    return None if n == "all" else int(n)


def run_spec(args: argparse.Namespace, **overrides: Any) -> RunSpec:
    config: VerifierConfig = verifier_config(args)
    if not args.no_cache:
        config = config.model_copy(update={"call_cache": str(args.runs_root / ".cache" / CACHE_FILE)})
    values: dict[str, Any] = {
        "benchmark": getattr(args, "benchmark", "halueval"),
        "task": getattr(args, "task", "qa"),
        "level": getattr(args, "level", "response"),
        "n": sample_size(args),
        "seed": config.model.seed or 0,
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
    _fit_default_size(args, values)
    if "debate" in values:
        debate = values.pop("debate")
        values["verifier"] = values["verifier"].model_copy(update={"debate": debate})
    return RunSpec.model_validate(values)


def _fit_default_size(args: argparse.Namespace, values: dict[str, Any]) -> None:
    """The paper's sample size is a default, not a request: on a data file with fewer records (a mirror, a
    subset) the run takes them all, says so, and is named after the size it has. An --n the user gave past the
    file is refused when the items are read (experiments.data)."""
    if args.n is not None or values["benchmark"] != "halueval" or values["n"] is None:
        return
    available = halueval_records(values["task"], Path(values["data_dir"]))
    if available is not None and 0 < available < values["n"]:
        log.warning(
            "%s has %d records, fewer than the paper's %d: the run takes all %d",
            values["task"],
            available,
            values["n"],
            available,
        )
        values["n"] = available


def provenance_of(spec: RunSpec) -> Any:
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


def announce(spec: RunSpec, run_dir: Path, embedded: bool) -> None:
    """What a run says once its folder exists: where, and on the embedded model how long it may take."""
    err.print(f"[dim]run folder: {run_dir}[/]")
    if embedded:
        announce_embedded(spec)


def announce_embedded(spec: RunSpec) -> None:
    items = spec.n if spec.n is not None else sum(1 for _ in items_for(spec))
    debate = spec.verifier.debate
    calls = (1 + 3 * debate.min_rounds, 1 + 3 * max(debate.max_rounds, 1))
    rate = last_call_rate()
    if rate is None:
        when = "no call rate measured on this machine yet (2 cores: a few seconds a call)"
    else:
        low, high = (items * c / rate for c in calls)
        when = f"at the last measured {rate:.2f} calls/s, about {duration(low)} to {duration(high)}"
    err.print(
        f"{items} items on the embedded {EMBEDDED_MODEL_NAME} ({calls[0]}-{calls[1]} model calls a claim): {when}; "
        "its verdicts are not the method's accuracy. --n 10 for a quick look, --model.base-url for a real model.",
        highlight=False,
    )


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _run_on_ray(spec: RunSpec, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    """The run's items across a Ray cluster (its config recorded first, here), then its metrics."""
    require_extra("ray", "--backend ray")
    from experiments.ray_backend import run_with_ray

    config_path = check_run_dir(run_dir, spec, overwrite=args.overwrite)

    async def record_config() -> None:
        from debate.pipeline import Verifier

        async with Verifier(config=spec.verifier) as verifier:
            if not config_path.exists():
                write_config(config_path, provenance_of(spec)(verifier, verifier.meta().prompts))
            announce(spec, run_dir, verifier.embedded)

    run_blocking(record_config())
    run_with_ray(spec, run_dir, shards=args.shards, concurrency=items_in_flight(args, spec.verifier))
    return evaluate_run(run_dir, spec)


def run_one(spec: RunSpec, args: argparse.Namespace, *, out: Path | None = None) -> tuple[Path, dict[str, Any]]:
    output_folder(args.runs_root, "--runs-root")
    chosen = out if out is not None else args.out
    run_dir = open_run_dir(
        spec, out=None if chosen is None else output_folder(chosen, "--out"), runs_root=args.runs_root
    )
    on_interrupt(kept_records(run_dir / "results.jsonl"))
    if args.backend == "ray":
        return run_dir, _run_on_ray(spec, args, run_dir)
    progress = progress_bar(TextColumn("{task.description}"), TextColumn("{task.fields[acc]}"))
    seen = {"n": 0, "correct": 0, "calls": 0, "embedded": 0}
    started = time.monotonic()

    def opened(run_dir: Path, embedded: bool) -> None:
        seen["embedded"] = int(embedded)
        announce(spec, run_dir, embedded)

    with progress:
        bar = progress.add_task(spec.name(), total=spec.n, acc="")

        def advance(record: Record) -> None:
            seen["n"] += 1
            if isinstance(record, PredictionRecord):
                seen["calls"] += record.llm_calls
                seen["correct"] += int(record.pred_factual is not None and record.pred_factual == record.label_factual)
            progress.update(bar, advance=1, acc=f"acc {seen['correct'] / seen['n']:.3f}")

        try:
            metrics = run_blocking(
                run_experiment(
                    spec,
                    run_dir=run_dir,
                    concurrency=items_in_flight(args, spec.verifier),
                    provenance=provenance_of(spec),
                    on_record=advance,
                    retry_failed=args.retry_failed,
                    overwrite=args.overwrite,
                    workers=args.workers,
                    on_open=opened,
                )
            )
        finally:
            if seen["embedded"]:
                record_call_rate(seen["calls"], time.monotonic() - started)
    return run_dir, metrics


def _add_run_folder_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a run goes, how a re-run treats it, and where it runs."""
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<timestamp>-<name>)")
    parser.add_argument("--runs-root", type=Path, default=Path("runs"), help="where run folders and the cache go")
    parser.add_argument("--no-cache", action="store_true", help="do not use the model-call cache")
    parser.add_argument(
        "--retry-failed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on a re-run, redo items that failed for a transient reason (default: on)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a run folder that holds another configuration (default: refuse)",
    )
    parser.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local processes (--workers) or Ray tasks (--shards)",
    )
    parser.add_argument("--shards", type=int, default=2, help="Ray tasks (with --backend ray)")
