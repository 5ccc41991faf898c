"""Soak test under a fault storm (prints figures, asserts nothing):

    python benchmarks/bench_faults.py --items 500 --fault-rate 0.3 --kills 3

A batch of QA items runs against a fake endpoint (another process, benchmarks/fake_endpoint.py) that answers 30% of
chat requests with one of nine faults (429 with Retry-After, 500, 503, hangs, dropped connections, prose, truncated
JSON, wrong keys, empty choices). The batch is killed with SIGKILL at random points and re-run until it finishes.
Printed: whether every id is in the output exactly once and in input order, silent verdicts (a verdict that is not
the endpoint's answer: must be 0), items redone, endpoint calls against a fault-free run of the same batch, and wall
time. The fake answers "factual" exactly for the items whose claim says "even", so a wrong verdict is visible.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from debate.results import scan_results

HERE = Path(__file__).resolve().parent


def _endpoint(fault_rate: float, seed: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "fake_endpoint.py"),
            "--fault-rate",
            str(fault_rate),
            "--seed",
            str(seed),
            "--verdict-rule",
            "--hang-s",
            "30",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().split()[1])
    return proc, f"http://127.0.0.1:{port}/v1"


def _requests(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as reply:
        return int(json.loads(reply.read())["requests"])


def _command(source: Path, out: Path, url: str, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "debate.cli",
        "verify",
        "--input",
        str(source),
        "--output",
        str(out),
        "--model.base-url",
        url,
        "--model.model",
        "fake-model",
        "--model.timeout-s",
        str(args.timeout),
        "--model.max-concurrency",
        str(args.concurrency),
        "--debate.min-rounds",
        str(args.min_rounds),
    ]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--min-rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    source = work / "in.jsonl"
    ids = [f"q{i}" for i in range(args.items)]
    with source.open("w") as fh:
        for i, item_id in enumerate(ids):
            parity = "even" if i % 2 == 0 else "odd"
            row = {
                "id": item_id,
                "question": f"Which parity has {i}?",
                "response": f"The number {i} is {parity}.",
                "reference": "Every whole number has a parity.",
            }
            fh.write(json.dumps(row) + "\n")

    clean, clean_url = _endpoint(0.0, args.seed)
    try:
        done = subprocess.run(
            _command(source, work / "clean.jsonl", clean_url, args), env=_env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        clean_calls = _requests(clean_url)
    finally:
        clean.terminate()
        clean.wait()

    storm, url = _endpoint(args.fault_rate, args.seed)
    out = work / "storm.jsonl"
    started = time.perf_counter()
    redone = runs = exit_1 = 0
    try:
        thresholds = sorted(rng.uniform(0.1, 0.9) * args.items for _ in range(args.kills))
        for threshold in thresholds:
            redone += len(scan_results(out).redo)
            proc = subprocess.Popen(
                _command(source, out, url, args), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            runs += 1
            while proc.poll() is None and _lines(out) < threshold:
                time.sleep(0.02)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
        while True:
            redone += len(scan_results(out).redo)
            finished = subprocess.run(_command(source, out, url, args), env=_env(), capture_output=True, text=True)
            runs += 1
            # Done when a run finishes and leaves nothing transient behind (a run's own late failures wait for
            # the next run, as a user's re-run would redo them).
            if finished.returncode == 0 and not scan_results(out).redo:
                break
            exit_1 += finished.returncode == 1
            if runs > 20:
                raise SystemExit(f"no clean finish after {runs} runs:\n{finished.stderr}")
        storm_calls = _requests(url)
    finally:
        storm.terminate()
        storm.wait()
    wall = time.perf_counter() - started

    records = [json.loads(line) for line in out.read_text().splitlines()]
    seen = [r.get("id") for r in records]
    silent = 0
    unverifiable: dict[str, int] = {}
    for record in records:
        verdict = record["result"]["verdict"]
        expected = "factual" if " even" in record["response"] else "non_factual"
        if verdict in ("factual", "non_factual") and verdict != expected:
            silent += 1
        for claim in record["result"]["claims"]:
            if claim["failure"] is not None:
                kind = f"{claim['failure']['kind']}{' (transient)' if claim['failure']['transient'] else ''}"
                unverifiable[kind] = unverifiable.get(kind, 0) + 1
    print(
        f"items: {args.items}, fault rate {args.fault_rate:.0%}, {args.kills} kill -9s, {runs} runs "
        f"({exit_1} stopped with exit 1 on consecutive failures)"
    )
    print(f"ids exactly once, in input order: {seen == ids} ({len(seen)} records, {len(set(seen))} distinct ids)")
    print(f"silent verdicts (a verdict that is not the endpoint's answer): {silent}")
    print(f"unverifiable at the end: {sum(unverifiable.values())} {unverifiable or ''}")
    print(f"items redone (records left by a transient failure or a kill): {redone}")
    print(
        f"endpoint calls: {storm_calls} under the storm vs {clean_calls} fault-free ({storm_calls / clean_calls:.2f}x)"
    )
    print(f"wall time under the storm: {wall:.1f}s ({work})")


if __name__ == "__main__":
    main()
