"""Memory of a long `debate verify --input` stream, and the calls a re-run makes. Prints figures; asserts nothing.

    python benchmarks/bench_memory.py --sizes 1000 10000 100000 --workers auto

For each size, a fresh QA batch of that many lines (min rounds 0: S0 decides, one call per item) runs against
`fake_endpoint.py` (0 ms latency) in another process; the peak RSS of the largest process of the batch (the writer,
or a worker) is printed. Flat means the peak does not grow with the size. The largest batch is then run again on
its own output: a finished batch makes no endpoint calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_throughput import endpoint_stats, fake_endpoint


def _batch(source: Path, output: Path, port: int, concurrency: int, workers: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB of the largest process) of one `debate verify --input` run."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    command = [
        sys.executable,
        "-m",
        "debate.cli",
        "verify",
        "--input",
        str(source),
        "--output",
        str(output),
        "--model.base-url",
        f"http://127.0.0.1:{port}/v1",
        "--debate.min-rounds",
        "0",
        "--model.max-concurrency",
        str(concurrency),
        "--workers",
        workers,
    ]
    # ru_maxrss of RUSAGE_CHILDREN is the largest finished descendant so far: each run gets a fresh parent process.
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode); "
        "sys.stderr.write(done.stderr[-2000:] if done.returncode else '')"
    )
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, env=env, check=False)
    wall, rss_kib, code = done.stdout.split()
    if code != "0":
        raise SystemExit(f"batch failed (exit {code}):\n{done.stderr}")
    return float(wall), int(rss_kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", default="auto")
    args = parser.parse_args()
    fake, port = fake_endpoint(0.0)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(
                f"| items | wall | items/s | peak RSS (largest process) | --workers {args.workers}, --concurrency "
                f"{args.concurrency} |"
            )
            print("| --- | --- | --- | --- | --- |")
            output = Path(tmp) / "out.jsonl"
            for size in args.sizes:
                source = Path(tmp) / f"in-{size}.jsonl"
                with source.open("w", encoding="utf-8") as fh:
                    for i in range(size):
                        fh.write(
                            json.dumps(
                                {
                                    "id": f"q{i}",
                                    "question": f"Question {i}?",
                                    "response": f"Answer {i}.",
                                    "reference": f"Knowledge about item {i}.",
                                }
                            )
                            + "\n"
                        )
                output = Path(tmp) / f"out-{size}.jsonl"
                wall, rss = _batch(source, output, port, args.concurrency, args.workers)
                print(f"| {size:,} | {wall:.1f} s | {size / wall:.0f} | {rss:.0f} MiB | |", flush=True)
            before = endpoint_stats(port)["requests"]
            started = time.perf_counter()
            wall, rss = _batch(source, output, port, args.concurrency, args.workers)
            calls = endpoint_stats(port)["requests"] - before
            print(
                f"re-run of the finished {args.sizes[-1]:,}-item batch: {calls:.0f} endpoint calls, {wall:.1f} s, "
                f"peak RSS {rss:.0f} MiB ({time.perf_counter() - started:.1f} s with the probe)"
            )
    finally:
        fake.terminate()
        fake.wait()


if __name__ == "__main__":
    main()
