"""What `debate guard` itself adds to a request, with real processes: a fake model endpoint as the upstream
(fake_endpoint.py, its own process, answering after --upstream-ms, each reply's time drawn from +-50% of it, and
streaming an event every --token-ms, as a model server does), the guard in front of it (`--debate later
--prefilter.prefilters rules`, so no model call is made in the request path: what is measured is the guard's own
work, the verification's model calls excluded), and a load of C concurrent clients (aiohttp; started spread over
the upstream's time, as a running service's are) sent straight to the upstream and through the guard, whole and
streamed. Prints p50 and p99 latency of each (and of a stream's first byte), the added latency (guard - direct),
errors by cause, the guard's CPU per request (its process's user + system time over the phase, the decision writer
included) and how many decisions reached the store.

    python benchmarks/bench_guard.py                                # 64 concurrent, 2,000 requests a phase
    python benchmarks/bench_guard.py --stream-modes hold,pass --requests 1000
    python benchmarks/bench_guard.py --upstream-ms 0 --token-ms 0   # saturation: the guard's own ceiling here
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
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


def _upstream(latency_ms: float, token_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fake_endpoint.py"),
            "--answer",
            ANSWER,
            "--latency-ms",
            str(latency_ms),
            "--token-ms",
            str(token_ms),
            "--latency-spread",
            "0.5",
        ],
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


@dataclass
class Phase:
    """One phase's latencies (seconds) and its failures by cause."""

    total: list[float] = field(default_factory=list)
    first_byte: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


async def _load(base: str, *, requests: int, concurrency: int, stream: bool, spread_s: float = 0.0) -> Phase:
    body = json.dumps(
        {
            "model": "fake-model",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "sources": SOURCES,
            "stream": stream,
        }
    ).encode()
    phase = Phase()
    left = requests
    # aiohttp: httpx's pool, under 64 concurrent requests, was this load generator's bottleneck (measured: 200 ms
    # p50 against an endpoint that answers at once).
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def worker(n: int) -> None:
            nonlocal left
            # Started spread over the upstream's time, as the clients of a running service are, not as one burst.
            await asyncio.sleep(spread_s * n / concurrency)
            while left > 0:
                left -= 1
                started = time.perf_counter()
                try:
                    async with client.post(
                        f"{base}/chat/completions", data=body, headers={"content-type": "application/json"}
                    ) as response:
                        first = await response.content.readany()
                        phase.first_byte.append(time.perf_counter() - started)
                        content = first + await response.read()
                        if response.status != 200:
                            phase.errors[f"status {response.status}"] += 1
                            continue
                        if stream and b"[DONE]" not in content:
                            phase.errors["a stream without [DONE]"] += 1
                            continue
                except (aiohttp.ClientError, TimeoutError) as exc:
                    phase.errors[type(exc).__name__] += 1
                    continue
                phase.total.append(time.perf_counter() - started)

        await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return phase


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000 if q < 100 else max(values)


def _row(name: str, phase: Phase, direct: Phase | None, cpu_ms: float | None, stream: bool) -> str:
    p50, p99 = _ms(phase.total, 50), _ms(phase.total, 99)
    first = f"{_ms(phase.first_byte, 50):>9.1f}" if stream else f"{'':>9}"
    errors = sum(phase.errors.values())
    notes = [f"{n} {cause}" for cause, n in phase.errors.most_common()]
    if direct is not None:
        added = f"added p50/p99 +{p50 - _ms(direct.total, 50):.2f} / +{p99 - _ms(direct.total, 99):.2f} ms"
        if stream:
            added += f", first byte p50 +{_ms(phase.first_byte, 50) - _ms(direct.first_byte, 50):.2f} ms"
        notes.insert(0, f"{added}; guard CPU {cpu_ms:.2f} ms/request")
    return f"{name:<22} {p50:>8.1f} {p99:>8.1f} {first} {errors:>6}  {'; '.join(notes)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase (default: 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default: 64)")
    parser.add_argument("--stream-modes", default="hold", help="the guard's --stream values to run (default: hold)")
    parser.add_argument(
        "--upstream-ms", type=float, default=500, help="the upstream's time to answer (or to its first event) (500)"
    )
    parser.add_argument("--token-ms", type=float, default=20, help="the upstream's time between stream events (20)")
    args = parser.parse_args()
    upstream, upstream_url = _upstream(args.upstream_ms, args.token_ms)
    rows: list[str] = []
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
                        load = {"requests": args.requests, "concurrency": args.concurrency, "stream": stream}
                        spread_s = args.upstream_ms / 1000
                        direct = asyncio.run(_load(upstream_url, **load, spread_s=spread_s))
                        before = _cpu_s(guard.pid)
                        through = asyncio.run(_load(guard_url, **load, spread_s=spread_s))
                        cpu_ms = (_cpu_s(guard.pid) - before) * 1000 / args.requests
                        rows.append(_row(f"direct, {kind}", direct, None, None, stream))
                        rows.append(_row(f"guard, {kind}", through, direct, cpu_ms, stream))
                finally:
                    guard.send_signal(signal.SIGTERM)
                    guard.wait(timeout=120)
                stored = create_engine(db).connect().execute(text("SELECT count(*) FROM guard_decisions")).scalar()
                sent = 2 * (args.requests + 50)
                print(f"--stream {mode}: decisions stored {stored} of {sent} guarded requests", flush=True)
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    print(
        f"\n{args.concurrency} concurrent, {args.requests} requests a phase, upstream {args.upstream_ms:g} ms to "
        f"answer, {args.token_ms:g} ms between stream events; cores: {os.cpu_count()}"
    )
    print(f"{'phase':<22} {'p50 ms':>8} {'p99 ms':>8} {'1st byte':>9} {'errors':>6}  notes")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
