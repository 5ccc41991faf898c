"""--workers: the same records, in input order, from N processes; errors and dead workers stop the run cleanly."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from debate.errors import ModelRequestError, UsageError
from debate.workers import WorkerError, process_map, resolve_workers
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import FIXTURES, op

pytestmark = pytest.mark.slow  # starts processes

DATA = FIXTURES / "data"


@dataclass(frozen=True)
class _Job:
    """Sleeps a random time per item (so completion order differs from input order), then reports its pid."""

    workers: int = 2
    fail_on: int | None = None
    die_on: int | None = None
    started: Any = None
    """A barrier every worker waits at before its first item, so all of them take part however slowly each one
    starts (on a loaded machine one spawned process can otherwise finish every item before the next is up)."""

    @asynccontextmanager
    async def open(self, worker: int) -> AsyncIterator[Callable[[int], Awaitable[tuple[int, int]]]]:
        if self.started is not None:
            await asyncio.to_thread(self.started.wait, 60)

        async def handle(item: int) -> tuple[int, int]:
            await asyncio.sleep(random.random() / 50)
            if item == self.fail_on:
                raise ModelRequestError(f"item {item} refused", status=401)
            if item == self.die_on:
                os._exit(7)
            return item, os.getpid()

        yield handle


async def test_results_come_back_in_input_order_from_several_processes() -> None:
    started = multiprocessing.get_context("spawn").Barrier(2)
    results = [r async for r in process_map(range(60), _Job(started=started), limit=8)]
    assert [item for item, _ in results] == list(range(60))
    pids = {pid for _, pid in results}
    assert len(pids) == 2 and os.getpid() not in pids


async def test_an_items_typed_error_surfaces_as_itself_when_due() -> None:
    seen: list[int] = []
    with pytest.raises(ModelRequestError, match="item 5 refused") as caught:
        async for item, _ in process_map(range(40), _Job(fail_on=5), limit=4):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4] and caught.value.fatal


async def test_a_dead_worker_stops_the_run_with_a_clear_error() -> None:
    with pytest.raises(WorkerError, match="exited with code 7"):
        async for _ in process_map(range(40), _Job(die_on=3), limit=4):
            pass


async def test_the_model_concurrency_is_split_exactly_between_workers() -> None:
    from debate import Verifier, VerifierConfig
    from debate.config import ModelConfig
    from debate.testing import ScriptedChatClient

    def shares(workers: int) -> list[int]:
        return [c.model.max_concurrency for c in verifier.worker_configs(workers)]

    config = VerifierConfig(model=ModelConfig(max_concurrency=5))
    async with Verifier(config=config, client=ScriptedChatClient([])) as verifier:
        assert shares(2) == [3, 2] and shares(1) == [5]
        assert shares(8) == [1] * 5  # never a worker without a model slot


def test_workers_option_values() -> None:
    assert resolve_workers("3") == 3 and resolve_workers("auto") >= 1
    with pytest.raises(UsageError, match="at least 1"):
        resolve_workers("0")


def _debate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def _verdicts(path: Path) -> list[tuple[object, ...]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r.get("id"), r["line"], r.get("result", {}).get("verdict"), "error" in r) for r in rows]


def test_verify_batch_with_workers_writes_what_one_process_writes_and_resumes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        json.dumps(
            {
                "id": f"q{i}",
                "question": "Q?",
                "response": f"Answer {i}{' even' if i % 3 == 0 else ''}.",
                "reference": "Some knowledge.",
            }
        )
        for i in range(12)
    ]
    lines.insert(5, "{not json")
    source.write_text("\n".join(lines) + "\n")

    # Routed by the item each call is made for (X-Debate-Item), in whichever worker process it runs.
    routes = {f"debate@q{i}": (lambda call, i=i: Reply(content=op(i % 3 == 0))) for i in range(12)}
    with FakeOpenAI(routes=routes) as server:
        common = [
            "--input",
            str(source),
            "--model.base-url",
            server.base_url,
            "--debate.min-rounds",
            "0",
            "--model.max-concurrency",
            "4",
            "--tolerate-unchecked",  # line 6 is an input error
        ]
        one = _debate("verify", *common, "--output", str(tmp_path / "one.jsonl"))
        assert one.returncode == 0, one.stderr[-2000:]
        calls = len(server.requests)
        two = _debate("verify", *common, "--output", str(tmp_path / "two.jsonl"), "--workers", "2")
        assert two.returncode == 0, two.stderr[-2000:]
        assert len(server.requests) == 2 * calls
        again = _debate("verify", *common, "--output", str(tmp_path / "two.jsonl"), "--workers", "2")
        assert again.returncode == 0 and "0 written" in again.stderr and len(server.requests) == 2 * calls
    expected = _verdicts(tmp_path / "one.jsonl")
    assert _verdicts(tmp_path / "two.jsonl") == expected
    assert [v[2] for v in expected if v[0] is not None] == [
        "factual" if i % 3 == 0 else "non_factual" for i in range(12)
    ]
    assert expected[5] == (None, 6, None, True)


def test_eval_with_workers_matches_one_process(tmp_path: Path) -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        common = ["--data-dir", str(DATA), "--model.base-url", server.base_url, "--no-cache", "--n", "8"]
        one = _debate("eval", "halueval", "--task", "qa", "--method", "mcmad", *common, "--out", str(tmp_path / "a"))
        assert one.returncode == 0, one.stderr[-2000:]
        two = _debate(
            "eval",
            "halueval",
            "--task",
            "qa",
            "--method",
            "mcmad",
            *common,
            "--out",
            str(tmp_path / "b"),
            "--workers",
            "2",
        )
        assert two.returncode == 0, two.stderr[-2000:]
    keep = ("id", "pred_factual", "label_factual", "llm_calls")
    rows = {
        d: [{k: json.loads(x)[k] for k in keep} for x in (tmp_path / d / "results.jsonl").read_text().splitlines()]
        for d in ("a", "b")
    }
    assert rows["a"] == rows["b"] and len(rows["a"]) == 8
    assert (
        json.loads((tmp_path / "a" / "metrics.json").read_text())["accuracy"]
        == json.loads((tmp_path / "b" / "metrics.json").read_text())["accuracy"]
    )
