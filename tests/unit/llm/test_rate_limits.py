"""Rate limits (`--model.requests-per-minute`, `--model.tokens-per-minute`): one schedule for every worker process, the
server's Retry-After and `x-ratelimit-*` honoured by all of them, and no call lost in a storm of 429s. These tests
check what was sent when (the limit's meaning), not how fast anything ran: the limiter's throughput is
benchmarks/bench_rate_limit.py's."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from debate.llm._ratelimit import RateLimiter, SharedRates, adopt_shared, reset_seconds
from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import debate, op


def test_openai_reset_durations() -> None:
    assert reset_seconds("6m0s") == 360.0 and reset_seconds("1s") == 1.0 and reset_seconds("0.5") == 0.5
    assert reset_seconds("20ms") == 0.02 and reset_seconds("1h2m") == 3720.0 and reset_seconds("soon") is None


def test_requests_are_spaced_by_the_limit() -> None:
    limiter = RateLimiter("http://spacing.test", requests_per_minute=600, tokens_per_minute=None)
    starts = [limiter._reserve(0) for _ in range(20)]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(abs(gap - 0.1) < 1e-9 for gap in gaps)


def test_tokens_are_spaced_by_their_count_and_settled_to_the_usage() -> None:
    limiter = RateLimiter("http://tokens.test", requests_per_minute=None, tokens_per_minute=6000)  # 100 a second
    first = limiter._reserve(100)  # within the one-second burst: now
    second = limiter._reserve(500)  # a call larger than the burst goes once the schedule is a burst ahead
    third = limiter._reserve(100)
    assert abs((second - first) - 1.0) < 0.01 and abs((third - second) - 5.0) < 0.01
    limiter.settle(100, 0)  # the last call used nothing: its second is given back
    assert abs(limiter._reserve(100) - third) < 0.01


@pytest.mark.slow
def test_a_pause_holds_every_process_sharing_the_schedule() -> None:
    shared = SharedRates.for_processes(multiprocessing.get_context("spawn"))
    adopt_shared(shared)
    try:
        one = RateLimiter("http://a.test", requests_per_minute=60_000, tokens_per_minute=None)
        other = RateLimiter("http://a.test", requests_per_minute=60_000, tokens_per_minute=None)
        one.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "600s"})
        # the other limiter waits the server's reset too (a reset far beyond any pause a loaded machine makes)
        assert other._reserve(0) - time.monotonic() > 300
    finally:
        adopt_shared(None)


def _storm() -> dict[str, Route]:
    """A 429 storm: every third model call is refused twice (with a short Retry-After) before it is answered, and
    the first ten requests of the run are all refused."""
    attempts: dict[tuple[str | None, str | None], int] = {}
    stormy: set[tuple[str | None, str | None]] = set()
    lock = threading.Lock()
    seen = [0]

    def route(call: Call) -> Reply:
        with lock:
            seen[0] += 1
            key = (call.item, call.site)
            if key not in attempts:
                attempts[key] = 0
                if len(attempts) % 3 == 0:
                    stormy.add(key)
            attempts[key] += 1
            refused = seen[0] <= 10 or (key in stormy and attempts[key] <= 2)
        if refused:
            return Reply(status=429, headers={"retry-after": "0.2"}, error_message="rate limited")
        return Reply(content=op(True, 0, "fine"), headers={"x-ratelimit-remaining-requests": "5"})

    return {"debate": route}


@pytest.mark.slow
def test_a_429_storm_loses_no_call_and_the_limit_holds_across_workers(tmp_path: Path) -> None:
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    items = [{"id": f"q{k}", "question": "Q?", "response": "A.", "reference": "A."} for k in range(6)]
    source.write_text("".join(json.dumps(item) + "\n" for item in items))
    routes = _storm()
    with FakeOpenAI(routes=routes) as server:
        done = debate(
            "verify",
            "--input",
            str(source),
            "--output",
            str(output),
            "--model.base-url",
            server.base_url,
            "--workers",
            "2",
            "--model.max-concurrency",
            "4",
            "--model.requests-per-minute",
            "300",
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["id"] for r in records] == [item["id"] for item in items]
    assert all(r["result"]["verdict"] == "factual" for r in records)  # no call lost: every debate finished
    turns = sum(len(s["turns"]) for r in records for c in r["result"]["claims"] for s in c["debate"]["states"])
    assert sum(c.purpose.startswith("debate") for c in server.calls) > turns + 10  # the storm happened
    times = sorted(server.request_times)
    # At 300 a minute (one every 0.2 s) from one schedule shared by both workers, a 2-second window holds 10
    # requests; 2 more allow for scheduling jitter on a loaded machine (each worker alone at 300 would send 20).
    assert max(sum(1 for t in times if start <= t < start + 2.0) for start in times) <= 12
