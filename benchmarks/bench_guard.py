"""What `debate guard` itself adds to a request, with real processes: a fake model endpoint as the upstream
(fake_endpoint.py, its own process, answering after --upstream-ms, each reply's time drawn from +-50% of it, and
streaming an event every --token-ms, as a model server does), the guard in front of it (`--debate later
--prefilter.prefilters rules`, so no model call is made in the request path: what is measured is the guard's own
work, the verification's model calls excluded), and a load of C concurrent clients (aiohttp; started spread over
the upstream's time, as a running service's are) sent straight to the upstream and through the guard, whole and
streamed. Prints p50 and p99 latency of each (and of a stream's first byte), the added latency (guard - direct),
errors by cause, the guard's CPU per request (its process's user + system time over the phase; its decision writer's,
a process of its own, apart) and how many decisions reached the store.

Each request names its own upstream time (drawn once, from a fixed seed), and the same requests with the same times
are sent straight and through the guard, so the added latency is measured request by request (the p50 and p99 of
guard - direct for each request), not as the difference of two samples' medians (which, with a 500 ms +-50% upstream,
moves by several ms from run to run on its own). With two cores or more the guard runs on a core of its own and the
load generator and the upstream on the others (as in a deployment, where the guard does not share its CPU with its
callers and the model server); `--no-pin` lets the three share every core.

First comes a floor phase (whole requests; `--no-floor` skips it): the same requests through bare_proxy.py, the
guard's HTTP server and upstream client with nothing of the guard, on the guard's core. What it adds is what any
proxy on this stack pays on this host (the hop, two more connections' work, waking the core); the guard's figure
less the floor's is what verifying and recording cost.

    python benchmarks/bench_guard.py                                # 64 concurrent, 2,000 requests a phase
    python benchmarks/bench_guard.py --stream-modes hold,pass --requests 1000
    python benchmarks/bench_guard.py --upstream-ms 0 --token-ms 0   # saturation: the guard's own ceiling here
    python benchmarks/bench_guard.py --no-pin                       # guard, clients and upstream share the cores
    python benchmarks/bench_guard.py --no-floor                     # the guard's phases only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _children_cpu_s(pid: int) -> float:
    """The CPU of `pid`'s running children: the guard's decision writer is a process of its own, and its time is
    the guard's cost as much as the request path's."""
    children = {c for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()}
    return sum(_cpu_s(int(c)) for c in children)


def _steal_s() -> float:
    """CPU time the hypervisor gave to other machines, over all cores, since boot (/proc/stat's `steal`): a shared
    virtual machine's noise, printed so a run taken while the host was busy is seen as such."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / TICKS if len(fields) > 8 else 0.0


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
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


def _cpus(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """The guard's cores and everyone else's: with --pin and two cores or more, the last core for the guard."""
    cores = sorted(os.sched_getaffinity(0))
    if not pin or len(cores) < 2:
        return None, None
    return {cores[-1]}, set(cores[:-1])


def _start(
    argv: list[str], cpus: set[int] | None, *, stdout: int, stderr: int | None = None
) -> subprocess.Popen[bytes]:
    # Set before the process starts, so every thread and process it makes (the decision writer, the loop's executor)
    # inherits it.
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return subprocess.Popen(argv, preexec_fn=preexec, stdout=stdout, stderr=stderr)


def start_upstream(token_ms: float, cpus: set[int] | None) -> tuple[subprocess.Popen[bytes], str]:
    """fake_endpoint.py answering with ANSWER, in a process of its own on `cpus`; the process and its base URL."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "fake_endpoint.py"), "--answer", ANSWER]
    process = _start([*argv, "--token-ms", str(token_ms)], cpus, stdout=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    return process, f"http://127.0.0.1:{line.split()[1]}/v1"


def _guard(upstream: str, db: str, stream: str, cpus: set[int] | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
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
        "--model.base-url",
        upstream,
        "--model.model",
        "fake-model",
    ]
    process = _start(argv, cpus, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/healthz", process)
    return process, f"http://127.0.0.1:{port}/v1"


def _bodies(requests: int, *, stream: bool, upstream_ms: float, seed: int = 7) -> list[bytes]:
    """The phase's requests, each naming its upstream time (upstream_ms +-50%, from a fixed seed): the same list is
    sent straight and through the guard."""
    draw = random.Random(seed)
    bodies = []
    for _ in range(requests):
        latency = upstream_ms * draw.uniform(0.5, 1.5)
        request = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "sources": SOURCES,
            "stream": stream,
            "metadata": {"fake_latency_ms": f"{latency:.3f}"},
        }
        bodies.append(json.dumps(request).encode())
    return bodies


@dataclass
class Phase:
    """One phase's latencies (seconds) by request, its failures by cause and the load generator's CPU."""

    total: dict[int, float] = field(default_factory=dict)
    first_byte: dict[int, float] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    client_cpu_s: float = 0.0


async def _load(base: str, bodies: list[bytes], *, concurrency: int, stream: bool, spread_s: float = 0.0) -> Phase:
    phase = Phase()
    order = iter(range(len(bodies)))
    cpu = time.process_time()
    # aiohttp: httpx's pool, under 64 concurrent requests, was this load generator's bottleneck (measured: 200 ms
    # p50 against an endpoint that answers at once).
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def worker(n: int) -> None:
            # Started spread over the upstream's time, as the clients of a running service are, not as one burst.
            await asyncio.sleep(spread_s * n / concurrency)
            for i in order:
                started = time.perf_counter()
                try:
                    async with client.post(f"{base}/chat/completions", data=bodies[i], headers=headers) as response:
                        first = await response.content.readany()
                        phase.first_byte[i] = time.perf_counter() - started
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
                phase.total[i] = time.perf_counter() - started

        await asyncio.gather(*(worker(n) for n in range(concurrency)))
    phase.client_cpu_s = time.process_time() - cpu
    return phase


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000 if q < 100 else max(values)


def _added(through: dict[int, float], direct: dict[int, float]) -> list[float]:
    """guard - direct, request by request (the same request, with the same upstream time, both ways)."""
    return [through[i] - direct[i] for i in through.keys() & direct.keys()]


def _row(name: str, phase: Phase, direct: Phase | None, cpu: dict[str, float], stream: bool) -> str:
    totals = list(phase.total.values())
    p50, p99 = _ms(totals, 50), _ms(totals, 99)
    first = f"{_ms(list(phase.first_byte.values()), 50):>9.1f}" if stream else f"{'':>9}"
    errors = sum(phase.errors.values())
    notes = [f"{n} {cause}" for cause, n in phase.errors.most_common()]
    if direct is not None:
        added = _added(phase.total, direct.total)
        text = f"added p50/p99 {_ms(added, 50):+.2f} / {_ms(added, 99):+.2f} ms"
        if stream:
            text += f", first byte p50 {_ms(_added(phase.first_byte, direct.first_byte), 50):+.2f} ms"
        notes.insert(0, text)
    notes.append("CPU ms/request: " + ", ".join(f"{who} {ms:.2f}" for who, ms in cpu.items()))
    return f"{name:<22} {p50:>8.1f} {p99:>8.1f} {first} {errors:>6}  {'; '.join(notes)}"


def _measure(
    args: argparse.Namespace,
    upstream: tuple[subprocess.Popen[bytes], str],
    proxy: tuple[subprocess.Popen[bytes], str],
    *,
    name: str,
    kind: str,
    stream: bool,
) -> list[str]:
    """The same requests straight to the upstream and through `proxy` (the guard, or the bare proxy); two rows
    (`direct, kind` and `name, kind`), with the CPU per request of `proxy`'s process (as `name`) and of its children
    (its decision writer)."""
    (upstream_process, upstream_url), (process, url) = upstream, proxy
    warm = _bodies(50, stream=stream, upstream_ms=0)
    asyncio.run(_load(upstream_url, warm, concurrency=8, stream=stream))
    asyncio.run(_load(url, warm, concurrency=8, stream=stream))
    bodies = _bodies(args.requests, stream=stream, upstream_ms=args.upstream_ms)
    spread_s = args.upstream_ms / 1000
    phases: dict[str, tuple[Phase, dict[str, float]]] = {}
    for who, base in (("direct", upstream_url), ("through", url)):
        before = {name: _cpu_s(process.pid), "writer": _children_cpu_s(process.pid)}
        before |= {"upstream": _cpu_s(upstream_process.pid), "stolen": _steal_s()}
        phase = asyncio.run(_load(base, bodies, concurrency=args.concurrency, stream=stream, spread_s=spread_s))
        used = {name: _cpu_s(process.pid) - before[name]}
        used["writer"] = _children_cpu_s(process.pid) - before["writer"]
        used["clients"] = phase.client_cpu_s
        used["upstream"] = _cpu_s(upstream_process.pid) - before["upstream"]
        used["stolen"] = _steal_s() - before["stolen"]  # printed per request, as the CPU is
        mine = (name, "writer")
        cpu = {k: v * 1000 / args.requests for k, v in used.items() if who == "through" or k not in mine}
        phases[who] = (phase, cpu)
    (direct, direct_cpu), (through, through_cpu) = phases["direct"], phases["through"]
    return [
        _row(f"direct, {kind}", direct, None, direct_cpu, stream),
        _row(f"{name}, {kind}", through, direct, through_cpu, stream),
    ]


def _phases(
    args: argparse.Namespace, upstream: tuple[subprocess.Popen[bytes], str], mode: str, cpus: set[int] | None
) -> list[str]:
    """Whole and streamed requests, straight and through a guard with `--stream mode` on `cpus`; the rows to print."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        db = f"sqlite:///{folder}/desk.sqlite"
        guard = _guard(upstream[1], db, mode, cpus)
        try:
            for stream in (False, True):
                kind = f"stream {mode}" if stream else "whole"
                rows += _measure(args, upstream, guard, name="guard", kind=kind, stream=stream)
        finally:
            guard[0].send_signal(signal.SIGTERM)
            guard[0].wait(timeout=120)
        stored = create_engine(db).connect().execute(text("SELECT count(*) FROM guard_decisions")).scalar()
    sent = 2 * (args.requests + 50)
    print(f"--stream {mode}: decisions stored {stored} of {sent} guarded requests", flush=True)
    return rows


def _floor(args: argparse.Namespace, upstream: tuple[subprocess.Popen[bytes], str], cpus: set[int] | None) -> list[str]:
    """Whole requests through bare_proxy.py (the guard's server and upstream client, nothing else) on `cpus`."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "benchmarks" / "bare_proxy.py"), "--upstream", upstream[1], "--port", str(port)]
    process = _start(argv, cpus, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(f"http://127.0.0.1:{port}/healthz", process)
    try:
        proxy = (process, f"http://127.0.0.1:{port}/v1")
        return _measure(args, upstream, proxy, name="floor", kind="whole", stream=False)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase (default: 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default: 64)")
    parser.add_argument("--stream-modes", default="hold", help="the guard's --stream values to run (default: hold)")
    parser.add_argument(
        "--upstream-ms", type=float, default=500, help="the upstream's time to answer (or to its first event) (500)"
    )
    parser.add_argument("--token-ms", type=float, default=20, help="the upstream's time between stream events (20)")
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the guard on a core of its own, clients and upstream on the others (default: on, with 2+ cores)",
    )
    parser.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="first, whole requests through bare_proxy.py: the guard's server stack with nothing of the guard (on)",
    )
    args = parser.parse_args()
    guard_cpus, other_cpus = _cpus(args.pin)
    if other_cpus:
        os.sched_setaffinity(0, other_cpus)
    upstream = start_upstream(args.token_ms, other_cpus)
    rows: list[str] = []
    try:
        if args.floor:
            rows += _floor(args, upstream, guard_cpus)
        for mode in args.stream_modes.split(","):
            rows += _phases(args, upstream, mode, guard_cpus)
    finally:
        upstream[0].terminate()
        upstream[0].wait(timeout=10)
    where = "guard, clients and upstream sharing every core"
    if guard_cpus and other_cpus:
        where = f"the guard on core(s) {sorted(guard_cpus)}, clients and upstream on {sorted(other_cpus)}"
    print(
        f"\n{args.concurrency} concurrent, {args.requests} requests a phase, upstream {args.upstream_ms:g} ms +-50% to "
        f"answer, {args.token_ms:g} ms between stream events; cores: {os.cpu_count()}, {where}"
    )
    print(f"{'phase':<22} {'p50 ms':>8} {'p99 ms':>8} {'1st byte':>9} {'errors':>6}  notes")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
