"""`debate dynamics simulate`: a run folder made by the real engine over HTTP against a simulated population, in the
experiments' format (config.json + results.jsonl), so fit, predict and validate read it like any run."""

from __future__ import annotations

import json
from pathlib import Path

from debate import ModelConfig
from debate.concurrency import run_blocking
from debate.engine import load_chain
from debate.errors import UsageError
from debate.provenance import git_commit, package_version
from debate.results import PredictionRecord
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

__all__ = ["simulate_run"]


async def _over_http(
    population: Population, *, chain: str, min_rounds: int, max_rounds: int, labels: dict[str, bool]
) -> list[Report]:
    agents = SimulatedAgents(population, load_chain(chain), labels)
    async with population_endpoint(agents) as url:
        model = ModelConfig(base_url=url, model="simulated", max_concurrency=16)
        return await simulated_reports(
            population, chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, labels=labels, model=model
        )


def simulate_run(
    roles: Path,
    *,
    chain: str,
    min_rounds: int,
    max_rounds: int,
    n: int,
    share_true: float,
    out: Path,
    seed: int | None = None,
) -> str:
    """Simulate `n` claims and write the run folder `out`; returns a one-line summary. The items and their labels
    follow the roles file's seed; `seed` replaces it for the agents' draws only, so runs with different seeds are
    independent runs on the same items (what `debate dynamics validate` compares)."""
    if (out / "results.jsonl").exists():
        raise UsageError(f"{out} already holds a run; choose another --out")
    population = load_population(roles)
    labels = labels_for(n, share_true, population.seed)
    labels_seed = population.seed
    if seed is not None:
        population = population.model_copy(update={"seed": seed})
    reports = run_blocking(
        _over_http(population, chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, labels=labels)
    )
    out.mkdir(parents=True, exist_ok=True)
    debate = {"chain": chain, "min_rounds": min_rounds, "max_rounds": max_rounds}
    config = {
        "spec": {"benchmark": "simulated", "task": "qa", "n": n, "method": "mcmad", "verifier": {"debate": debate}},
        "simulated": {
            "population": population.model_dump(mode="json"),
            "share_true": share_true,
            "roles_file": str(roles),
        },
        "provenance": {
            "seed": population.seed,
            "labels_seed": labels_seed,
            "git_commit": git_commit(),
            "package_version": package_version(),
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    outcomes = _write_results(out / "results.jsonl", labels, reports)
    correct = sum(o.label == o.pred for o in outcomes)
    # The same metrics as an eval run's, so `debate report` reads the folder like any run (no baselines: the
    # simulated items have no text for a length baseline to read).
    metrics = summarize(outcomes, seed=labels_seed) | {
        "llm_calls_per_item": sum(r.usage.llm_calls for r in reports) / max(1, n)
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return f"{n} simulated claims in {out}: accuracy {correct / n:.3f} ({chain}, min {min_rounds}, max {max_rounds})"


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
            )
            fh.write(record.to_json() + "\n")
    return outcomes
