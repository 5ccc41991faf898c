"""Fan a run out over Ray (`--backend ray`, extra `markov-debate[ray]`): item i goes to shard i mod k, each shard
is a Ray task with its own client writing its own part file, and the parts are merged into the run folder's
results.jsonl in input order. Streaming and resumable like the local backend."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from debate.concurrency import run_blocking
from debate.pipeline import Verifier
from debate.results import scan_results
from experiments.data import Item
from experiments.resume import settled_ids
from experiments.runner import RunSpec, items_for, make_method, method_config, process_items

__all__ = ["merge_parts", "run_with_ray", "shard_items"]


def shard_items(items: Iterator[Item], *, shard: int, shards: int, skip: set[str]) -> Iterator[Item]:
    for index, item in enumerate(items):
        if index % shards == shard and item.id not in skip:
            yield item


def _part(run_dir: Path, shard: int) -> Path:
    return run_dir / f"results.part-{shard}.jsonl"


async def _run_shard(spec: RunSpec, run_dir: Path, shard: int, shards: int, concurrency: int) -> int:
    skip = settled_ids(scan_results(run_dir / "results.jsonl"), items_for(spec))
    async with Verifier(config=method_config(spec)) as verifier:
        method, _ = make_method(spec, verifier)
        return await process_items(
            shard_items(items_for(spec), shard=shard, shards=shards, skip=skip),
            method,
            results_path=_part(run_dir, shard),
            concurrency=concurrency,
        )


def merge_parts(spec: RunSpec, run_dir: Path, shards: int) -> int:
    """Append the shards' records to results.jsonl in input order (each part is already in input order)."""
    results = run_dir / "results.jsonl"
    done = settled_ids(scan_results(results), items_for(spec))
    parts = [_part(run_dir, k) for k in range(shards)]
    for part in parts:
        scan_results(part)  # drops a torn last line
    handles = [part.open(encoding="utf-8") if part.exists() else None for part in parts]
    pending: list[dict[str, Any] | None] = [None] * shards
    merged = 0
    try:
        with results.open("a", encoding="utf-8") as out:
            for index, item in enumerate(items_for(spec)):
                k = index % shards
                if item.id in done:
                    continue
                if pending[k] is None and handles[k] is not None:
                    line = handles[k].readline()  # type: ignore[union-attr]
                    pending[k] = json.loads(line) if line.strip() else None
                record = pending[k]
                if record is None or record["id"] != item.id:
                    continue  # this shard has not reached the item (an interrupted shard): it stays pending
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                pending[k] = None
                merged += 1
            out.flush()
            os.fsync(out.fileno())
    finally:
        for handle in handles:
            if handle is not None:
                handle.close()
    for part in parts:
        part.unlink(missing_ok=True)
        part.with_name(part.name + ".lock").unlink(missing_ok=True)
    return merged


def _secrets(spec: RunSpec) -> dict[str, str | None]:
    model_key = spec.verifier.model.api_key
    search = spec.verifier.search
    return {
        "model": model_key.get_secret_value() if model_key else None,
        "search": search.api_key.get_secret_value() if search and search.api_key else None,
    }


def _with_secrets(spec: RunSpec, secrets: dict[str, str | None]) -> RunSpec:
    verifier = spec.verifier
    model_key, search_key = secrets.get("model"), secrets.get("search")
    if model_key:
        model = verifier.model.model_copy(update={"api_key": SecretStr(model_key)})
        verifier = verifier.model_copy(update={"model": model})
    if search_key and verifier.search is not None:
        search = verifier.search.model_copy(update={"api_key": SecretStr(search_key)})
        verifier = verifier.model_copy(update={"search": search})
    return spec.model_copy(update={"verifier": verifier})


def _split_rates(spec: RunSpec, shards: int) -> RunSpec:
    """Each shard's share of model.requests_per_minute / tokens_per_minute: shards may run on other machines, so they
    cannot share one schedule as local worker processes do (debate.llm._ratelimit); equal shares keep the total."""
    model = spec.verifier.model
    shares = {
        name: max(1, value // shards)
        for name in ("requests_per_minute", "tokens_per_minute")
        if (value := getattr(model, name)) is not None
    }
    if not shares:
        return spec
    verifier = spec.verifier.model_copy(update={"model": model.model_copy(update=shares)})
    return spec.model_copy(update={"verifier": verifier})


def run_with_ray(spec: RunSpec, run_dir: Path, *, shards: int, concurrency: int) -> int:
    """Run the shards as Ray tasks (a local Ray unless RAY_ADDRESS points at a cluster); returns records merged."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)

    def shard_task(spec_json: str, secrets: dict[str, str | None], run_dir_text: str, shard: int) -> int:
        shard_spec = _with_secrets(RunSpec.model_validate_json(spec_json), secrets)
        return run_blocking(_run_shard(shard_spec, Path(run_dir_text), shard, shards, concurrency))

    # Called, not used as a decorator: without the ray extra installed, mypy --strict sees an untyped decorator.
    remote_task = ray.remote(shard_task)

    # Keys are excluded from serialised configs (they never reach reports), so they travel on their own.
    secrets = _secrets(spec)
    spec_json = _split_rates(spec, shards).model_dump_json()
    ray.get([remote_task.remote(spec_json, secrets, str(run_dir.resolve()), k) for k in range(shards)])
    return merge_parts(spec, run_dir, shards)
