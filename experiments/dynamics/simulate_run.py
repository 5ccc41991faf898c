"""`debate dynamics simulate`: a run folder made by the real engine over HTTP against a simulated population, in the
experiments' format (config.json + results.jsonl), so fit, predict and validate read it like any run."""

from __future__ import annotations

import json
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debate import ModelConfig
from debate.concurrency import run_blocking
from debate.engine import load_chain
from debate.errors import UsageError
from debate.provenance import git_commit, package_version
from debate.results import PredictionRecord, ResultRecord
from debate.types import Report
from experiments.dynamics.endpoint import population_endpoint
from experiments.dynamics.simulate import (
    Population,
    SimulatedAgents,
    labels_for,
    load_population,
    simulated_reports,
)
from experiments.metrics import Outcome, summarize

__all__ = ["Team", "simulate_run", "write_results_log"]


async def _over_http(
    population: Population,
    rounds: tuple[str, int, int],
    *,
    labels: dict[str, bool],
    governed: dict[str, object],
    team: Team,
) -> list[Report]:
    """The main population as model `team.model` behind one endpoint, and each other model of `team.roles` behind
    its own: a team of simulated models, each agent shown every turn of its debates (one record of what was said)."""
    chain, min_rounds, max_rounds = rounds
    said: dict[tuple[str, str], list[bool]] = {}
    populations = {team.model: population} | {name: other for name, other in team.roles.values()}
    async with AsyncExitStack() as stack:
        urls = {
            name: await stack.enter_async_context(
                population_endpoint(SimulatedAgents(other, load_chain(chain), labels, name=name, said=said))
            )
            for name, other in populations.items()
        }
        roles = {
            role: {"model": {"base_url": urls[name], "model": name, "max_concurrency": 16}}
            for role, (name, _) in team.roles.items()
        }
        return await simulated_reports(
            population,
            chain=chain,
            min_rounds=min_rounds,
            max_rounds=max_rounds,
            labels=labels,
            model=ModelConfig(base_url=urls[team.model], model=team.model, max_concurrency=16),
            governed=governed,
            roles=roles,
        )


@dataclass(frozen=True)
class Team:
    """The models of a simulated run: the main population's name, and each role on another (name, population)."""

    model: str = "simulated"
    roles: Mapping[str, tuple[str, Population]] = field(default_factory=dict)


def _reports(
    population: Population,
    rounds: tuple[str, int, int],
    labels: dict[str, bool],
    governed: dict[str, object],
    *,
    in_process: bool,
    team: Team,
) -> Coroutine[Any, Any, list[Report]]:
    chain, min_rounds, max_rounds = rounds
    if in_process and team.roles:
        raise UsageError("a team of simulated models runs over HTTP, one endpoint per model (not in process)")
    if in_process:  # the same engine and agents without the loopback server (benchmarks' large runs)
        return simulated_reports(
            population,
            chain=chain,
            min_rounds=min_rounds,
            max_rounds=max_rounds,
            labels=labels,
            governed=governed,
            concurrency=64,
        )
    return _over_http(population, rounds, labels=labels, governed=governed, team=team)


def simulate_run(
    roles: Path | Population,
    *,
    chain: str,
    min_rounds: int,
    max_rounds: int,
    n: int,
    share_true: float,
    out: Path,
    seed: int | None = None,
    items_seed: int | None = None,
    governed: dict[str, object] | None = None,
    in_process: bool = False,
    team: Team | None = None,
) -> str:
    """Simulate `n` claims and write the run folder `out`; returns a one-line summary. The items and their labels
    follow the roles file's seed; `seed` replaces it for the agents' draws only, so runs with different seeds are
    independent runs on the same items (what `debate dynamics validate` compares); `items_seed` draws other items
    (other ids, labels and classes), as a calibration needs to be tried on. `governed`: calibration, stop and
    force_calibration, as DebateConfig's. `in_process`: no loopback endpoint (the agents answer in process). `team`:
    the model name the population answers as, and roles on other simulated models (the items follow the main
    population's seed)."""
    team = team or Team()
    if (out / "results.jsonl").exists():
        raise UsageError(f"{out} already holds a run; choose another --out")
    population = roles if isinstance(roles, Population) else load_population(roles)
    labels_seed = population.seed if items_seed is None else items_seed
    labels = labels_for(n, share_true, labels_seed, prefix="sim" if items_seed is None else f"sim{items_seed}")
    if seed is not None:
        population = population.model_copy(update={"seed": seed})
    governed = {k: v for k, v in (governed or {}).items() if v is not None}
    rounds = (chain, min_rounds, max_rounds)
    reports = run_blocking(_reports(population, rounds, labels, governed, in_process=in_process, team=team))
    out.mkdir(parents=True, exist_ok=True)
    debate = {"chain": chain, "min_rounds": min_rounds, "max_rounds": max_rounds, **governed}
    config = _run_config(population, roles, team, debate=debate, n=n, share_true=share_true, labels_seed=labels_seed)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    outcomes = _write_results(out / "results.jsonl", labels, reports)
    correct = sum(o.label == o.pred for o in outcomes)
    # The same metrics as an eval run's, so `debate report` reads the folder like any run (no baselines: the
    # simulated items have no text for a length baseline to read).
    metrics = summarize(outcomes, seed=labels_seed) | {
        "llm_calls_per_item": sum(r.usage.llm_calls for r in reports) / max(1, n)
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    stop = f", {governed['stop']}" if governed.get("stop", "consensus") != "consensus" else ""
    return (
        f"{n} simulated claims in {out}: accuracy {correct / n:.3f} ({chain}, min {min_rounds}, max {max_rounds}{stop})"
    )


def _run_config(
    population: Population,
    roles: Path | Population,
    team: Team,
    *,
    debate: dict[str, object],
    n: int,
    share_true: float,
    labels_seed: int,
) -> dict[str, object]:
    """The run folder's config.json: the spec, the simulated models and the provenance."""
    return {
        "spec": {"benchmark": "simulated", "task": "qa", "n": n, "method": "mcmad", "verifier": {"debate": debate}},
        "simulated": {
            "population": population.model_dump(mode="json"),
            "share_true": share_true,
            "roles_file": str(roles) if isinstance(roles, Path) else None,
            "model": team.model,
            "role_models": {
                role: {"model": name, "population": other.model_dump(mode="json")}
                for role, (name, other) in team.roles.items()
            },
        },
        "provenance": {
            "seed": population.seed,
            "labels_seed": labels_seed,
            "git_commit": git_commit(),
            "package_version": package_version(),
        },
    }


def _write_results(path: Path, labels: dict[str, bool], reports: list[Report]) -> list[Outcome]:
    """The run's results log, one prediction per simulated claim; returns each claim's outcome."""
    outcomes = []
    with path.open("w", encoding="utf-8") as fh:
        for (item, label), report in zip(labels.items(), reports, strict=True):
            outcomes.append(Outcome(label=label, pred=report.factual, score=report.score))
            record = PredictionRecord(
                id=item,
                task="qa",
                label_factual=label,
                pred_factual=report.factual,
                decided_by="debate",
                llm_calls=report.usage.llm_calls,
                report=report.model_dump(mode="json"),
                p_factual=report.p_factual,
            )
            fh.write(record.to_json() + "\n")
    return outcomes


def write_results_log(path: Path, labels: Mapping[str, bool | None], reports: Sequence[Report]) -> None:
    """The simulated claims as `debate verify --input batch.jsonl --output path` writes them: one record a line, with
    the batch line's id and, where given, its `label_factual` (None: the line carries no label)."""
    with path.open("w", encoding="utf-8") as fh:
        for number, ((item, label), report) in enumerate(zip(labels.items(), reports, strict=True), 1):
            given: dict[str, object] = {"id": item, "response": "an answer"}
            if label is not None:
                given["label_factual"] = label
            fh.write(ResultRecord(line=number, result=report, **given).to_json() + "\n")
