"""`debate ablate teams`: team compositions as an ablation axis. Each team of a teams file (all on one model, a
stronger Leader, mixed families, the cascade) runs the same HaluEval sample; the table gives each team's accuracy,
calls and cost with their 95% intervals, and the plot accuracy against cost with the Pareto front (no team both
cheaper and more accurate)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.cli import output_folder
from debate.cli.layers import deep_merge
from debate.config import VerifierConfig
from debate.errors import UsageError, validation_problem
from debate.files import read_toml_file
from debate.pipeline import report_cost
from debate.results import PredictionRecord, read_records
from debate.types import Report
from experiments.cli_common import run_one, run_spec

__all__ = ["TeamEntry", "ablate_teams", "load_teams", "pareto_front", "replot_teams", "team_config"]


class TeamEntry(BaseModel):
    """One team of a teams file: what it changes in the run's configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=80)
    """How the table and the plot name it."""
    model: dict[str, Any] = Field(default_factory=dict)
    """Fields of `[model]` for this team."""
    roles: dict[str, Any] = Field(default_factory=dict)
    """`[roles.<role>.model]` for this team."""
    debate: dict[str, Any] = Field(default_factory=dict)
    """Fields of `[debate]` for this team (the cascade stop and its teams)."""


class _TeamsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    team: list[TeamEntry] = Field(min_length=1)


def load_teams(path: Path) -> list[TeamEntry]:
    """A teams file: `[[team]] name = "..."` with optional `[team.model]`, `[team.roles.<role>.model]` and
    `[team.debate]` tables; names unique."""
    try:
        teams = _TeamsFile.model_validate(read_toml_file(path, "teams file")).team
    except ValidationError as exc:
        raise UsageError(f"{path}: {validation_problem(exc)}") from exc
    names = [t.name for t in teams]
    if len(set(names)) < len(names):
        raise UsageError(
            f"{path}: two teams share a name ({', '.join(sorted({n for n in names if names.count(n) > 1}))})"
        )
    return teams


def team_config(base: VerifierConfig, team: TeamEntry, where: str = "teams file") -> VerifierConfig:
    """The run's configuration with the team's changes (the endpoint's key kept: it is never dumped)."""
    data = base.model_dump()
    data["model"]["api_key"] = base.model.api_key
    overlay = {"model": team.model, "roles": team.roles, "debate": team.debate}
    try:
        return VerifierConfig.model_validate(deep_merge(data, {k: v for k, v in overlay.items() if v}))
    except ValidationError as exc:
        raise UsageError(f"{where}: team {team.name!r}: {validation_problem(exc)}") from exc


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """The indices of the points no other point beats on both cost (lower) and accuracy (higher), by cost."""
    order = sorted(range(len(points)), key=lambda k: (points[k][0], -points[k][1]))
    front, best = [], -1.0
    for k in order:
        if points[k][1] > best:
            front.append(k)
            best = points[k][1]
    return front


def _costs(run_dir: Path, config: VerifierConfig) -> tuple[np.ndarray | None, np.ndarray]:
    """Per item: its cost (None for the run when a model has no price) and its model calls."""
    costs: list[float] = []
    calls: list[float] = []
    priced = True
    for record in read_records(run_dir / "results.jsonl"):
        if not isinstance(record, PredictionRecord) or record.report is None:
            continue
        report = Report.model_validate(record.report)
        spent = report_cost(report, config)
        priced = priced and spent is not None
        costs.append(spent or 0.0)
        calls.append(float(report.usage.llm_calls))
    return (np.array(costs) if priced else None), np.array(calls)


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    means = values[np.random.default_rng(0).integers(0, len(values), size=(1000, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "team"


def _cell(text: str) -> str:
    """A team's name as one markdown table cell: a `|` would end the cell and shift the row's columns."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def ablate_teams(args: argparse.Namespace) -> int:
    teams = load_teams(args.teams)
    folder: Path = output_folder(args.out or args.runs_root / "ablate-teams", "--out")
    rows: list[dict[str, Any]] = []
    for team in teams:
        spec = run_spec(args, task=args.task)
        config = team_config(spec.verifier, team, str(args.teams))
        spec = spec.model_copy(update={"verifier": config})
        run_dir, metrics = run_one(spec, args, out=folder / _slug(team.name))
        costs, calls = _costs(run_dir, config)
        rows.append(
            {
                "team": team.name,
                "n": metrics.get("n"),
                "accuracy": metrics.get("accuracy"),
                "accuracy_ci95": metrics.get("accuracy_ci95"),
                "calls": _interval(calls) if len(calls) else None,
                "cost": _interval(costs) if costs is not None and len(costs) else None,
            }
        )
    return _finish(folder, rows)


def replot_teams(folder: Path) -> int:
    """`debate ablate replot` of a teams ablation: its table and plots again from its teams.json."""
    rows = json.loads((folder / "teams.json").read_text())
    return _finish(folder, rows)


def _finish(folder: Path, rows: list[dict[str, Any]]) -> int:
    priced = [k for k, r in enumerate(rows) if r["cost"] is not None and r["accuracy"] is not None]
    front = {priced[k] for k in pareto_front([(rows[k]["cost"][0], rows[k]["accuracy"]) for k in priced])}
    lines = [
        "# Team compositions",
        "",
        "| team | n | accuracy [95%] | calls per item [95%] | cost per item (USD) [95%] | on the Pareto front |",
        "|---|---|---|---|---|---|",
    ]
    for k, row in enumerate(rows):
        accuracy = "-" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
        if row["accuracy_ci95"]:
            accuracy += f" [{row['accuracy_ci95'][0]:.3f}, {row['accuracy_ci95'][1]:.3f}]"
        calls = "-" if row["calls"] is None else "{:.2f} [{:.2f}, {:.2f}]".format(*row["calls"])
        cost = "no price known" if row["cost"] is None else "{:.6f} [{:.6f}, {:.6f}]".format(*row["cost"])
        on_front = "yes" if k in front else ("-" if k not in priced else "no")
        lines.append(f"| {_cell(row['team'])} | {row['n']} | {accuracy} | {calls} | {cost} | {on_front} |")
    table = "\n".join(lines) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    (folder / "teams.json").write_text(json.dumps(rows, indent=2) + "\n")
    plots = _plot(folder, rows, priced, front)
    sys.stdout.write(table + (f"plots: {', '.join(map(str, plots))}\n" if plots else ""))
    return 0


def _plot(folder: Path, rows: list[dict[str, Any]], priced: list[int], front: set[int]) -> list[Path]:
    if not priced:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for k in priced:
        row = rows[k]
        low, high = row["accuracy_ci95"] or (row["accuracy"], row["accuracy"])
        axis.errorbar(
            row["cost"][0],
            row["accuracy"],
            yerr=[[row["accuracy"] - low], [high - row["accuracy"]]],
            xerr=[[row["cost"][0] - row["cost"][1]], [row["cost"][2] - row["cost"][0]]],
            fmt="o",
            capsize=3,
        )
        axis.annotate(
            row["team"], (row["cost"][0], row["accuracy"]), fontsize=8, xytext=(4, 3), textcoords="offset points"
        )
    ordered = sorted(front, key=lambda k: rows[k]["cost"][0])
    axis.plot([rows[k]["cost"][0] for k in ordered], [rows[k]["accuracy"] for k in ordered], "--", label="Pareto front")
    axis.set_xlabel("cost per item (USD)")
    axis.set_ylabel("accuracy (95% CI)")
    axis.set_title(f"Team compositions (n = {rows[priced[0]]['n']} per team)")
    axis.legend()
    figure.tight_layout()
    paths = [folder / "teams.png", folder / "teams.svg"]
    for path in paths:
        figure.savefig(path, dpi=120)
    plt.close(figure)
    return paths
