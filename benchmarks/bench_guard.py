"""What `debate guard` itself adds to a request, with real processes: the fast fake endpoint as the upstream
(fake_endpoint.py, its own process), the guard in front of it (`--debate later --prefilter.prefilters rules`, so no
model call is made in the request path: what is measured is the guard's own work, the verification's model calls
excluded), and a load of C concurrent requests sent straight to the upstream and through the guard, whole and
streamed. Prints p50/p99 latency of each, the added latency (guard - direct), errors, the guard's CPU per request,
and how many decisions reached the store.

    python benchmarks/bench_guard.py                              # 64 concurrent, 2,000 requests a phase
    python benchmarks/bench_guard.py --concurrency 64 --requests 500 --stream-modes hold,pass
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
ANSWER = "Paris is the capital of France [doc1]. The Seine flows through Paris [doc2]."
SOURCES = {"doc1": "Paris is the capital of France.", "doc2": "The Seine flows through Paris."}
TICKS = os.sysconf("SC_CLK_TCK")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def _upstream() -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "fake_endpoint.py"), "--answer", ANSWER],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    return process, f"http://127.0.0.1:{line.split()[1]}/v1"


def _guard(upstream: str, db: str, stream: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    argv = [
        "debate",
        "guard",
        "--upstream",
        upstream,
        "--port",
        str(port),
        "--db",
        db,
        "--debate",
        "later",
        "--stream",
        stream,
        "--prefilter.prefilters",
        "rules",
        "--model.base_url",
        upstream,
        "--model.model",
        "fake-model",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait(f"http://127.0.0.1:{port}/healthz", process)
    return process, f"http://127.0.0.1:{port}/v1"


async def _load(base: str, *, requests: int, concurrency: int, stream: bool) -> tuple[list[float], int]:
    body: dict[str, Any] = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "sources": SOURCES,
        "stream": stream,
    }
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(requests):
        queue.put_nowait(n)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                try:
                    response = await client.post(f"{base}/chat/completions", json=body)
                    ok = response.status_code == 200 and (b"[DONE]" in response.content if stream else True)
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000 if q < 100 else max(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase (default: 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default: 64)")
    parser.add_argument("--stream-modes", default="hold", help="the guard's --stream values to run (default: hold)")
    args = parser.parse_args()
    upstream, upstream_url = _upstream()
    rows: list[tuple[str, float, float, int, str]] = []
    try:
        for mode in args.stream_modes.split(","):
            with tempfile.TemporaryDirectory() as folder:
                db = f"sqlite:///{folder}/desk.sqlite"
                guard, guard_url = _guard(upstream_url, db, mode)
                try:
                    for stream in (False, True):
                        kind = f"{'stream ' + mode if stream else 'whole'}"
                        asyncio.run(_load(upstream_url, requests=50, concurrency=8, stream=stream))  # warm-up
                        asyncio.run(_load(guard_url, requests=50, concurrency=8, stream=stream))
                        direct, direct_errors = asyncio.run(
                            _load(upstream_url, requests=args.requests, concurrency=args.concurrency, stream=stream)
                        )
                        before = _cpu_s(guard.pid)
                        through, errors = asyncio.run(
                            _load(guard_url, requests=args.requests, concurrency=args.concurrency, stream=stream)
                        )
                        cpu_ms = (_cpu_s(guard.pid) - before) * 1000 / max(1, len(through) + errors)
                        rows.append((f"direct, {kind}", _ms(direct, 50), _ms(direct, 99), direct_errors, ""))
                        added = f"+{_ms(through, 50) - _ms(direct, 50):.2f} / +{_ms(through, 99) - _ms(direct, 99):.2f}"
                        rows.append(
                            (
                                f"guard, {kind}",
                                _ms(through, 50),
                                _ms(through, 99),
                                errors,
                                f"added p50/p99 {added} ms; guard CPU {cpu_ms:.2f} ms/request",
                            )
                        )
                finally:
                    guard.send_signal(signal.SIGTERM)
                    guard.wait(timeout=120)
                stored = create_engine(db).connect().execute(text("SELECT count(*) FROM guard_decisions")).scalar()
                sent = 2 * (args.requests + 50)
                print(f"--stream {mode}: decisions stored {stored} of {sent} guarded requests", flush=True)
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    print(f"\n{args.concurrency} concurrent, {args.requests} requests a phase, cores: {os.cpu_count()}")
    print(f"{'phase':<24} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}  notes")
    for name, p50, p99, errors, note in rows:
        print(f"{name:<24} {p50:>8.2f} {p99:>8.2f} {errors:>7}  {note}")


if __name__ == "__main__":
    main()
