"""`debate report`: one table of several runs, or the RAG rules' monitoring figures over results logs."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError
from rich.markup import escape

from debate.cli.conventions import err
from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.results import PredictionRecord, read_records
from experiments.report_logs import log_rows, logs_table, unique
from experiments.runner import (
    RunSpec,
    evaluate_run,
)
from experiments.tables import markdown_table

__all__ = ["report", "report_rows"]


def report(args: argparse.Namespace) -> int:
    given = unique(args.runs)
    logs = [path for path in given if path.is_file()]
    folders = [path for path in given if not path.is_file()]
    if args.recompute:
        for run in folders:
            if (run / "metrics.json").is_file() and (run / "config.json").is_file():
                evaluate_run(run, _recorded_spec(json.loads((run / "config.json").read_text())["spec"]))
    rows = report_rows(folders, skipped=_say_skipped)
    summaries, monitoring = log_rows(logs, with_gone=args.with_gone)
    if not rows and not summaries:
        raise UsageError(
            "no finished run among the folders given (each needs config.json and metrics.json), and no "
            "results log (a .jsonl file of `debate verify --input ... --output`)"
        )
    calibration = _calibration_rows(rows)
    for row in rows:
        if row["run"] in calibration:
            row["p_factual_calibration"] = calibration[row["run"]]
    flat = [{k: v for k, v in row.items() if k != "metrics"} for row in rows]
    if args.format == "json":
        shown: Any = flat
        if summaries:
            shown = {"runs": flat, "results_logs": summaries, "rag_monitoring": monitoring}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return 0
    if summaries and args.format != "csv":
        sys.stdout.write(logs_table(summaries, {row["log"] for row in monitoring}))
    for table in (flat, summaries if args.format == "csv" else [], monitoring):
        if not table:
            continue
        if args.format == "csv":
            writer = csv.DictWriter(sys.stdout, fieldnames=list(table[0]), lineterminator="\n")
            writer.writeheader()
            for row in table:
                writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})
        elif table is flat:
            sys.stdout.write(markdown_table([(_label(row), row["metrics"]) for row in rows]))
            for name, found in calibration.items():
                sys.stdout.write(f"\n{Path(name).name}: {found['line']}\n")
        else:
            sys.stdout.write(_monitoring_table(monitoring))
    return 0


_MONITORING = (
    ("answers", "answers"),
    ("average_risk_score", "avg risk score"),
    ("high_risk_share", "high-risk share"),
    ("invalid_citation_frequency", "with invalid citations"),
    ("invalid_citations_per_answer", "invalid / answer"),
    ("uncited_frequency", "with uncited sentences"),
    ("uncited_sentences_per_answer", "uncited / answer"),
    ("average_judge_risk", "avg judge risk"),
    ("judged", "judged"),
    ("skipped", "records left out (not RAG answers)"),
)


def _calibration_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run whose items carry p_factual (a run with --debate.calibration): the expected calibration error (10
    bins) and Brier score against the gold labels, and the reliability diagram drawn into the run folder."""
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        results = Path(row["run"]) / "results.jsonl" if row["run"] else None
        if results is None or not results.is_file():
            continue
        pairs = [
            (r.p_factual, r.label_factual)
            for r in read_records(results)
            if isinstance(r, PredictionRecord) and r.p_factual is not None
        ]
        if not pairs:
            continue
        from experiments.dynamics.calibrate import plot_reliability, reliability
        from experiments.dynamics.report import reliability_line

        rel = reliability(pairs)
        diagram = [str(p) for p in plot_reliability(rel, Path(row["run"]), f"p_factual of {Path(row['run']).name}")]
        line = reliability_line(rel, "the responses' p_factual against their gold labels", diagram)
        found[row["run"]] = {**rel.model_dump(mode="json"), "diagram": diagram, "line": line}
    return found


def _monitoring_table(rows: list[dict[str, Any]]) -> str:
    """The RAG rules' monitoring figures, one row per results log."""

    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = [
        "\nRAG monitoring (the RAG rules: rules and judge over each log's RAG answers)\n",
        "| log | " + " | ".join(title for _, title in _MONITORING) + " |",
        "|---" * (len(_MONITORING) + 1) + "|",
    ]
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
        if debate.get("min_rounds", defaults.debate.min_rounds) != defaults.debate.min_rounds
        else "",
    ]
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


def _say_skipped(run: Path, why: str) -> None:
    # Whole lines: a long path folded at the console's width could not be copied back (nor found in a log).
    err.print(f"[yellow]skipped[/] {escape(str(run))}: {escape(why)}", soft_wrap=True)


def report_rows(runs: list[Path], *, skipped: Callable[[Path, str], None]) -> list[dict[str, Any]]:
    """One row per run, grouped by setting (benchmark, task, knowledge, sample), each setting followed by its
    model-free baselines once: runs of the same setting share one sample and so the same baseline figures."""
    by_setting: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    baselines: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in _run_folders(runs, skipped):
        metrics_path, config_path = run / "metrics.json", run / "config.json"
        if not metrics_path.is_file():
            skipped(run, "not finished (no metrics.json); re-run its command to finish it")
            continue
        metrics = json.loads(metrics_path.read_text())
        config = json.loads(config_path.read_text())
        spec = config["spec"]
        if spec["benchmark"] == "simulated":
            row = _simulated_row(run, spec, metrics)
            by_setting.setdefault((row["setting"], metrics["n"]), []).append(row)
            continue
        what = spec["task"] if spec["benchmark"] == "halueval" else f"{spec['level']}-level"
        if spec["benchmark"] == "factprompts" and not spec.get("verifier", {}).get("search"):
            what += " (no search: knowledge-free)"
        if spec["task"] in ("qa", "dialogue"):
            what += f" (knowledge {spec['knowledge']})"
        setting = f"{spec['benchmark']} {what}"
        key = (setting, metrics["n"], spec.get("seed"), spec.get("balanced"), spec.get("data_dir"))
        endpoint = "embedded" if config.get("embedded") else (urlparse(config.get("base_url") or "").netloc or "?")
        row = {
            "setting": setting,
            "method": spec["method"] + _variant(spec),
            "model": config.get("model", "?"),
            "endpoint": endpoint,
            "run": str(run),
            **_flat(metrics),
            "metrics": metrics,
        }
        by_setting.setdefault(key, []).append(row)
        for name, baseline in metrics.get("baselines", {}).items():
            if name != "tuning":
                baselines.setdefault(key, {}).setdefault(name, baseline)
    rows: list[dict[str, Any]] = []
    for key, runs_of_setting in by_setting.items():
        rows += runs_of_setting
        for name, baseline in baselines.get(key, {}).items():
            rows.append(
                {
                    "setting": key[0],
                    "method": name,
                    "model": "",
                    "endpoint": "",
                    "run": "",
                    **_flat(baseline),
                    "metrics": baseline,
                }
            )
    return rows


def _run_folders(paths: list[Path], skipped: Callable[[Path, str], None]) -> list[Path]:
    """The run folders among `paths`: a folder of runs (an ablation's, `runs/`) stands for the runs in it, so every
    folder the project writes is read; anything else is said to be skipped, with why."""
    found = []
    for path in paths:
        if (path / "config.json").is_file():
            found.append(path)
            continue
        inner = sorted(p for p in path.iterdir() if (p / "config.json").is_file()) if path.is_dir() else []
        if inner:
            found += inner
        elif not path.exists():
            skipped(path, "no such folder")
        else:
            skipped(path, "neither a run folder (no config.json) nor a folder of runs")
    return found


def _simulated_row(run: Path, spec: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    debate = spec.get("verifier", {}).get("debate", {})
    setting = (
        f"simulated qa (agents of stated accuracies, not a model; {debate.get('chain', '?')}, "
        f"min {debate.get('min_rounds', '?')}, max {debate.get('max_rounds', '?')}"
        + (f", {debate['stop']}" if debate.get("stop", "consensus") != "consensus" else "")
        + ")"
    )
    return {
        "setting": setting,
        "method": spec.get("method", "mcmad"),
        "model": "simulated",
        "endpoint": "127.0.0.1",
        "run": str(run),
        **_flat(metrics),
        "metrics": metrics,
    }


_COLUMNS = (
    "n",
    "accuracy",
    "precision",
    "recall",
    "f1",
    "f1_hallucination",
    "auroc",
    "unverifiable",
    "llm_calls_per_item",
)


def _flat(metrics: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name in _COLUMNS:
        flat[name] = metrics.get(name)
        ci = metrics.get(f"{name}_ci95")
        if name not in ("n", "unverifiable", "llm_calls_per_item"):
            flat[f"{name}_ci95"] = list(ci) if ci else None
    return flat
