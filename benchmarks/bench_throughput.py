"""Throughput of `debate eval` against a fast fake endpoint: how close the engine gets to the endpoint's limit.
Prints figures; asserts nothing.

    python benchmarks/bench_throughput.py                          # 200 HaluEval QA items x 7 calls, 100 ms latency
    python benchmarks/bench_throughput.py --items 200 --latency-ms 100 --concurrency 1 16 64 256 --workers 1 auto
    python benchmarks/bench_throughput.py --latency-ms 0 --concurrency 64     # CPU per call with no waiting

Each row is a fresh `debate eval halueval --task qa --method mcmad --min-rounds 2` (the paper's chain: S0 then one
state of three agents, 7 calls per item when they agree, which the fake's fixed reply makes them do) in its own
process, against `fake_endpoint.py` in another process started for that row. `measured` is the endpoint's busy
window (first request in to last reply out), so start-up and the metrics after the last call are shown apart;
`ideal` is ceil(items / c) x 7 x latency. CPU ms per call is the eval process tree's CPU (workers included) while
the endpoint is busy, over the calls made meanwhile (sampled from /proc at the first and the latest request seen);
CPU total includes start-up and the metrics; `fake CPU %` is the fake's CPU over the busy window (near 100%
would make the fake the bottleneck).
Peak RSS is the largest single process of the tree.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS_PER_ITEM = 7


def fake_endpoint(latency_ms: float) -> tuple[subprocess.Popen[str], int]:
    fake = subprocess.Popen(
        [sys.executable, str(HERE / "fake_endpoint.py"), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake.stdout is not None
    return fake, int(fake.stdout.readline().split()[1])


def endpoint_stats(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
        stats: dict[str, float] = json.loads(response.read())
    return stats


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its live descendants, plus its waited-for children, from /proc."""
    total = 0.0
    stack, root = [pid], True
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:  # exited between the listing and the read
            continue
        # utime, stime (and for the root cutime, cstime: its finished children) in clock ticks.
        total += sum(int(f) for f in fields[11 : 15 if root else 13]) / _TICK
        root = False
        stack.extend(int(c) for c in children)
    return total


def run_one(items: int, latency_ms: float, concurrency: int, workers: str, data_dir: str | None) -> dict[str, float]:
    fake, port = fake_endpoint(latency_ms)
    try:
        fake_cpu0 = endpoint_stats(port)["cpu_s"]
        with tempfile.TemporaryDirectory() as out:
            command = [
                sys.executable,
                "-m",
                "debate.cli",
                "eval",
                "halueval",
                "--task",
                "qa",
                "--method",
                "mcmad",
                "--n",
                str(items),
                "--debate.min-rounds",
                "2",
                "--model.base-url",
                f"http://127.0.0.1:{port}/v1",
                "--no-cache",
                "--model.max-concurrency",
                str(concurrency),
                "--workers",
                workers,
                "--out",
                str(Path(out) / "run"),
            ]
            if data_dir:
                command += ["--data-dir", data_dir]
            env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.time()
            run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            # The engine's CPU while the endpoint is busy, sampled at the first and at the latest request seen.
            first: tuple[float, float] | None = None
            latest: tuple[float, float] | None = None
            seen = 0.0
            while run.poll() is None:
                time.sleep(0.02)
                requests = endpoint_stats(port)["requests"]
                if requests > seen:
                    seen = requests
                    sample = (requests, _tree_cpu(run.pid))
                    first = first or sample
                    latest = sample
            stderr = run.stderr.read() if run.stderr else ""
            ended = time.time()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if run.returncode != 0:
                raise SystemExit(f"eval failed (exit {run.returncode}):\n{stderr[-2000:]}")
        stats = endpoint_stats(port)
    finally:
        fake.terminate()
        fake.wait()
    calls = stats["requests"]
    busy = stats["last"] - stats["first"]
    assert first is not None and latest is not None
    busy_calls = latest[0] - first[0]
    ideal = math.ceil(items / concurrency) * CALLS_PER_ITEM * latency_ms / 1000
    return {
        "calls": calls,
        "ideal": ideal,
        "measured": busy,
        "startup": stats["first"] - started,
        "tail": ended - stats["last"],
        "efficiency": ideal / busy if busy > 0 and ideal > 0 else float("nan"),
        "calls_per_s": calls / busy if busy > 0 else float("nan"),
        "cpu_ms_per_call": 1000 * (latest[1] - first[1]) / busy_calls if busy_calls else float("nan"),
        "cpu_total_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "fake_cpu_pct": 100 * (stats["cpu_s"] - fake_cpu0) / busy if busy > 0 else float("nan"),
        "peak_rss_mib": after.ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--workers", nargs="+", default=["1", "auto"], help="worker settings to run (1, N, auto)")
    parser.add_argument("--data-dir", default=None, help="folder with halueval/ (default: ../shared/data)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"machine: {platform.machine()}, {cores} cores, Python {platform.python_version()}; {args.items} HaluEval QA "
        f"items x {CALLS_PER_ITEM} calls, endpoint latency {args.latency_ms:g} ms"
    )
    print(
        "| --concurrency | --workers | ideal | measured | efficiency | calls/s | CPU ms/call | CPU total | "
        "fake CPU % | start-up | after last call | peak RSS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for concurrency in args.concurrency:
        for workers in args.workers:
            r = run_one(args.items, args.latency_ms, concurrency, workers, args.data_dir)
            print(
                f"| {concurrency} | {workers} | {r['ideal']:.1f} s | {r['measured']:.2f} s | {r['efficiency']:.2f} | "
                f"{r['calls_per_s']:.0f} | {r['cpu_ms_per_call']:.2f} | {r['cpu_total_s']:.1f} s | "
                f"{r['fake_cpu_pct']:.0f} | "
                f"{r['startup']:.2f} s | {r['tail']:.2f} s | {r['peak_rss_mib']:.0f} MiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
