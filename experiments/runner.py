"""One experiment run: items streamed through a method into `results.jsonl`, resumable, with its config, metrics
and a markdown table in the run folder."""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.llm import ChatClient
from debate.results import OutputLock, PredictionRecord, Record, compact_keeping, differences, run_ordered, scan_results
from debate.workers import Job
from experiments.baselines import Baselines, tuning_pairs
from experiments.data import Item, factprompts_items, halueval_items
from experiments.methods import METHODS, Method, MethodName, Prediction
from experiments.metrics import Outcome, summarize
from experiments.resume import resume_items
from experiments.tables import markdown_table

if TYPE_CHECKING:
    from debate.pipeline import Verifier

__all__ = [
    "RunSpec",
    "check_run_dir",
    "evaluate_run",
    "items_for",
    "make_method",
    "open_run_dir",
    "process_items",
    "recorded_digest",
    "run_experiment",
    "write_config",
]


class RunSpec(BaseModel):
    """Everything that defines a run (its hash names the run folder, so the same command resumes it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: Literal["halueval", "factprompts"]
    task: Literal["qa", "dialogue", "summarization", "general", "kbqa"]
    level: Literal["claim", "response"] = "response"
    n: int | None
    seed: int = 0
    balanced: bool = False
    knowledge: Literal["given", "none"] = "given"
    judge_knowledge: bool = False
    """halueval-judge only: give the judge the knowledge (HaluEval's own judge gets none for QA and dialogue)."""
    method: MethodName = "mcmad"
    """A registered method (experiments.methods.METHODS)."""
    data_dir: str
    verifier: VerifierConfig

    @field_validator("method")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in METHODS:
            raise ValueError(METHODS.unknown(value))
        return value

    def digest(self) -> str:
        # The endpoint's key is excluded by VerifierConfig itself; concurrency, rate limits, prices and tracing do
        # not change results (and leaving them out keeps the names of runs made before they existed).
        data = self.model_dump(mode="json")
        data["verifier"].pop("claim_concurrency", None)
        data["verifier"].pop("telemetry", None)
        roles = data["verifier"].pop("roles", None) or {}  # a model per role: kept when given, as [model] is
        data["verifier"] |= {"roles": roles} if roles else {}
        for model in (data["verifier"].get("model", {}), *(role.get("model", {}) for role in roles.values())):
            for name in ("max_concurrency", "requests_per_minute", "tokens_per_minute", "price_in", "price_out"):
                model.pop(name, None)
        debate = data["verifier"].get("debate", {})
        defaults: tuple[tuple[str, object], ...] = (("calibration", None), ("stop", "consensus"), ("cascade", []))
        for name, default in (*defaults, ("force_calibration", False), ("force_calibration_team", False)):
            if debate.get(name, default) == default:
                debate.pop(name, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def name(self) -> str:
        what: str = self.task if self.benchmark == "halueval" else self.level
        if self.benchmark == "factprompts" and self.verifier.search is None:
            # The paper searched Google for FactPrompts evidence; without a search backend the run is a different
            # setting and its name says so.
            what += "-nosearch"
        method = f"{self.method}+knowledge" if self.judge_knowledge else self.method
        return f"{self.benchmark}-{what}-{method}-n{self.n or 'all'}-s{self.seed}-{self.digest()[:8]}"


def items_for(spec: RunSpec) -> Iterator[Item]:
    data_dir = Path(spec.data_dir)
    if spec.benchmark == "factprompts":
        return factprompts_items(data_dir=data_dir, level=spec.level, n=spec.n, seed=spec.seed)
    return halueval_items(
        spec.task,  # type: ignore[arg-type]
        data_dir=data_dir,
        n=spec.n,
        seed=spec.seed,
        balanced=spec.balanced,
        knowledge=spec.knowledge == "given",
    )


def method_config(spec: RunSpec) -> VerifierConfig:
    """The Verifier config a method runs with (e.g. single and factool pin the chain to S0)."""
    return METHODS.get(spec.method).configure(spec.verifier)


def make_method(spec: RunSpec, verifier: Verifier) -> tuple[Method, dict[str, str]]:
    """The method object and the prompt hashes it uses."""
    method = METHODS.get(spec.method).build(verifier, spec.judge_knowledge)
    return method, method.prompt_hashes()


def open_run_dir(spec: RunSpec, *, out: Path | None, runs_root: Path = Path("runs")) -> Path:
    """`out` when given; else the existing folder of this spec under runs/ (resume), else a new timestamped one."""
    if out is not None:
        return out
    name = spec.name()
    if runs_root.is_dir():
        existing = sorted(runs_root.glob(f"*-{name}"))
        if not existing:
            # A run made by an earlier release is named by the digest of that release's layout: the same settings
            # are found by their recorded spec, brought to today's layout.
            # (Names changed too: FactPrompts runs without search gained "-nosearch".)
            digest = spec.digest()
            candidates = sorted(runs_root.glob(f"*-{glob.escape(spec.benchmark)}-*"))
            existing = [p for p in candidates if recorded_digest(p) == digest]
        if existing:
            return existing[-1]
    return runs_root / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{name}"


async def process_items(
    items: Iterator[Item],
    method: Method,
    *,
    results_path: Path,
    concurrency: int,
    on_record: Callable[[Record], None] | None = None,
    order: Callable[[], Iterable[str]] | None = None,
    retry_failed: bool = True,
    job: Job[Item, Record] | None = None,
) -> int:
    """Append a record per item not yet finished in `results_path`, in input order; then, given the ids in input
    `order`, compact the file to one record per item. Returns how many were written. Given a `job` (the same
    method, rebuilt in each process), the items run on its worker processes."""
    with OutputLock(results_path):
        state = scan_results(results_path, retry_failed=retry_failed)
        pending = resume_items(items, state, results_path)
        written = 0
        records = run_ordered(
            pending,
            functools.partial(_record, method),
            output=results_path,
            limit=concurrency,
            on_record=on_record,
            job=job,
        )
        async for _ in records:
            written += 1
        if order is not None:
            compact_keeping(results_path, list(order()))
    return written


async def _record(method: Method, item: Item) -> Record:
    started = time.perf_counter()
    prediction: Prediction = await method.predict(item)
    return PredictionRecord(
        id=item.id,
        task=item.task,
        label_factual=item.label_factual,
        pred_factual=prediction.pred_factual,
        score=prediction.score,
        decided_by=prediction.decided_by,
        llm_calls=prediction.usage.llm_calls,
        prompt_tokens=prediction.usage.prompt_tokens,
        completion_tokens=prediction.usage.completion_tokens,
        wall_s=round(time.perf_counter() - started, 3),
        length=len(item.response),
        source_line=item.source_line,
        error=prediction.error,
        transient=prediction.transient,
        report=prediction.report,
        p_factual=(prediction.report or {}).get("p_factual"),
        input_sha256=item.content_sha256(),
    )


def _method_handler(spec: RunSpec, verifier: Verifier) -> Callable[[Item], Awaitable[Record]]:
    method, _ = make_method(spec, verifier)
    return functools.partial(_record, method)


def source_line_of(item_id: str) -> int:
    """The source line in our ids: halueval-<task>-<line>, factprompts-<line>[-c<claim>]."""
    parts = item_id.split("-")
    return int(parts[1] if parts[0] == "factprompts" else parts[-1])


def _read_results(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                record.pop("report", None)  # keep memory flat: metrics need only the scalars
                yield record


def evaluate_run(run_dir: Path, spec: RunSpec) -> dict[str, Any]:
    """metrics.json and results.md from results.jsonl, with the model-free baselines beside the method."""
    records = list(_read_results(run_dir / "results.jsonl"))
    outcomes = [Outcome(label=r["label_factual"], pred=r["pred_factual"], score=r["score"]) for r in records]
    metrics: dict[str, Any] = summarize(outcomes, seed=spec.seed)
    n = max(len(records), 1)
    metrics |= {
        "llm_calls_per_item": sum(r["llm_calls"] for r in records) / n,
        "prompt_tokens_per_item": sum(r["prompt_tokens"] for r in records) / n,
        "completion_tokens_per_item": sum(r["completion_tokens"] for r in records) / n,
        "wall_s_per_item": sum(r["wall_s"] for r in records) / n,
        "decided_by": {k: sum(1 for r in records if r["decided_by"] == k) for k in {r["decided_by"] for r in records}},
    }
    rows: list[tuple[str, dict[str, Any]]] = [(spec.method, metrics)]
    baselines: dict[str, Any] = {}
    lines = {int(r["source_line"]) if "source_line" in r else source_line_of(r["id"]) for r in records}
    pairs = tuning_pairs(
        spec.benchmark, spec.task, data_dir=Path(spec.data_dir), exclude_lines=lines, seed=spec.seed, level=spec.level
    )
    if pairs:
        fitted = Baselines.fit(pairs)
        evaluated = [(r["length"], r["label_factual"]) for r in records]
        for name, result in (
            ("length-only", fitted.length_only(evaluated)),
            ("majority-class", fitted.majority(evaluated)),
        ):
            summary = summarize(result, seed=spec.seed)
            summary["llm_calls_per_item"] = 0.0
            baselines[name] = summary
            rows.append((name, summary))
        baselines["tuning"] = {
            "size": fitted.tuning_size,
            "length_threshold": fitted.threshold,
            "majority_factual": fitted.majority_factual,
        }
    metrics["baselines"] = baselines
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if spec.task in ("qa", "dialogue"):
        setting = f"knowledge={spec.knowledge}"
    elif spec.task == "summarization":
        setting = (
            f"evidence=top-{spec.verifier.retrieval.top_k} document sentences ({spec.verifier.retrieval.retriever})"
        )
    else:
        search = spec.verifier.search
        setting = f"evidence=search ({search.backend})" if search else "evidence=none (knowledge-free)"
    level = spec.level if spec.benchmark == "factprompts" else ""
    title = (
        f"# {spec.name()}\n\n{spec.benchmark} {spec.task} {level} {setting}; positive class = factual; unverifiable "
        f"items are counted wrong; 95% bootstrap CIs (1,000 resamples, seed {spec.seed}).\n\n"
    )
    (run_dir / "results.md").write_text(title + markdown_table(rows))
    return metrics


_RUN_FILES = ("config.json", "results.jsonl", "metrics.json", "results.md")


def check_run_dir(run_dir: Path, spec: RunSpec, *, overwrite: bool = False) -> Path:
    """Check the data and the folder before anything is created: a missing data file leaves no folder behind, and a
    folder holding another configuration is refused (naming the differences) unless `overwrite`. Returns the
    config.json path; the folder itself is made only once the model is up (`write_config`), so a run that cannot
    start leaves nothing behind."""
    next(iter(items_for(spec)), None)  # DataError (a missing or broken data file) before any folder exists
    config_path = run_dir / "config.json"
    if config_path.exists():
        if recorded_digest(run_dir) != spec.digest():
            if not overwrite:
                recorded_spec = _recorded(config_path).get("spec")
                shown = differences(recorded_spec, spec.model_dump(mode="json")) if recorded_spec else []
                raise UsageError(
                    f"{run_dir} holds a run with another configuration ({'; '.join(shown[:5]) or 'spec differs'}); "
                    "choose another --out, or --overwrite to replace it"
                )
            for name in _RUN_FILES:
                (run_dir / name).unlink(missing_ok=True)
    return config_path


def _recorded(config_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(config_path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_digest(run_dir: Path) -> str | None:
    """The digest of the spec a run folder recorded, recomputed under today's layout, so a run an earlier release
    made (its stored digest and its name computed over that release's fields) matches the same settings today; the
    stored digest when the spec no longer loads; None without a readable config.json."""
    recorded = _recorded(run_dir / "config.json")
    try:
        return RunSpec.model_validate(recorded.get("spec")).digest()
    except ValidationError:
        stored = recorded.get("spec_digest")
        return stored if isinstance(stored, str) else None


def write_config(config_path: Path, provenance: dict[str, Any]) -> None:
    """Create the run folder with its config.json (the run's provenance)."""
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(provenance, indent=2, default=str) + "\n")


async def run_experiment(
    spec: RunSpec,
    *,
    run_dir: Path,
    concurrency: int,
    provenance: Callable[[Verifier, dict[str, str]], dict[str, Any]],
    on_record: Callable[[Record], None] | None = None,
    client: ChatClient | None = None,
    retry_failed: bool = True,
    overwrite: bool = False,
    workers: int = 1,
    on_open: Callable[[Path, bool], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) `spec` into `run_dir` on this machine (on `workers` processes); returns the metrics.
    `on_open` is told the run folder once it exists (the model is up and the config recorded) and whether the
    endpoint is the embedded model."""
    if workers > 1 and client is not None:
        raise ValueError("a given client cannot be shared with worker processes")
    config_path = check_run_dir(run_dir, spec, overwrite=overwrite)
    from debate.pipeline import Verifier

    async with Verifier(config=method_config(spec), client=client) as verifier:
        method, prompts = make_method(spec, verifier)
        if config_path.exists():
            recorded = json.loads(config_path.read_text()).get("prompts")
            if recorded is not None and recorded != prompts:
                changed = sorted(k for k in {*recorded, *prompts} if recorded.get(k) != prompts.get(k))
                raise UsageError(
                    f"{run_dir}: prompt files changed since this run started ({', '.join(changed)}); "
                    "resuming would mix two prompt versions; choose another --out, or --overwrite to start over"
                )
        else:
            write_config(config_path, provenance(verifier, prompts))
        if on_open is not None:
            on_open(run_dir, verifier.embedded)
        await process_items(
            items_for(spec),
            method,
            results_path=run_dir / "results.jsonl",
            concurrency=concurrency,
            on_record=on_record,
            order=lambda: (item.id for item in items_for(spec)),
            retry_failed=retry_failed,
            job=verifier.job(workers, functools.partial(_method_handler, spec)),
        )
    return evaluate_run(run_dir, spec)
