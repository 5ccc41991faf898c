"""Issue 73's attacks on `debate guard`, re-run as the operator ran them, with real processes: the guard (as the
docs deploy it, `--debate later` for the first two phases so no judge call is in the request path), a fake upstream
and a fake judge (benchmarks/fake_endpoint.py, processes of their own).

1. headers: 60 connections without a key, each sending 32 MB of request headers, while /healthz is asked every
   100 ms. Prints the guard's RSS at start, at most and after, and health's p50 / max.
2. nul: one chat request whose user message holds a NUL, then 100 ordinary ones; prints what each was answered and
   how many decisions reached the store (all 101, or the store's count says what was lost). `--postgres` runs it
   on a throwaway PostgreSQL cluster (Debian's), where the issue found it; else SQLite.
3. judge: the guard verifying inline on a judge configured for batch runs (5 attempts, backoff from 1 s up to
   30 s); 3 answers with the judge up, then the judge is killed (its port refuses connections) and 20 answers in a
   row and 20 at once are timed.

    python benchmarks/guard_attack.py [--postgres] [--phases headers,nul,judge]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_guard import ANSWER, SOURCES, free_port, start_upstream, wait_ready  # noqa: E402

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "Capital?"}], "sources": SOURCES}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _guard(upstream: str, judge: str, db: str, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = ["debate", "guard", "--upstream", upstream, "--port", str(port), "--db", db]
    argv += ["--model.base-url", judge, "--model.model", "fake-model", "--prefilter.prefilters", "rules", *extra]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(f"http://127.0.0.1:{port}/healthz", process)
    return process, f"http://127.0.0.1:{port}"


def _ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


def headers_phase(url: str, pid: int) -> str:
    start = _rss_mb(pid)
    stop, peak, health = threading.Event(), [start], []
    port = int(url.rsplit(":", 1)[1])
    line = b"X-Flood: " + b"a" * 8000 + b"\r\n"

    def flood() -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            try:
                for _ in range(32 * 1024 * 1024 // len(line)):
                    sock.sendall(line)
            except OSError:
                pass  # refused (431) and closed: what the limit is for

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_mb(pid))
            began = time.perf_counter()
            httpx.get(url + "/healthz", timeout=30)
            health.append(time.perf_counter() - began)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    with ThreadPoolExecutor(60) as pool:
        list(pool.map(lambda _: flood(), range(60)))
    time.sleep(1.0)
    stop.set()
    watcher.join()
    return (
        f"headers: 60 x 32 MB: guard RSS {start:.0f} MB at start, {peak[0]:.0f} at most, {_rss_mb(pid):.0f} after; "
        f"health {_ms(health)} ({len(health)} asked)"
    )


def nul_phase(url: str, db: str) -> str:
    nul = {**BODY, "messages": [{"role": "user", "content": "Capital?\u0000 of France"}]}
    first = httpx.post(url + "/v1/chat/completions", json=nul, timeout=60)
    statuses = [httpx.post(url + "/v1/chat/completions", json=BODY, timeout=60).status_code for _ in range(100)]
    engine = create_engine(db)
    deadline, stored = time.monotonic() + 60, 0
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            stored = int(conn.execute(text("SELECT count(*) FROM guard_decisions")).scalar_one())
        if stored >= 101:
            break
        time.sleep(0.5)
    engine.dispose()
    health = httpx.get(url + "/healthz", timeout=10).json()
    answered = {code: statuses.count(code) for code in sorted(set(statuses))}
    return (
        f"nul: the NUL request answered {first.status_code}; the 100 after it {answered}; "
        f"{stored} of 101 decisions stored; store {health.get('store', '?')}"
    )


def judge_phase(upstream: str, db: str) -> str:
    judge = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "fake_endpoint.py")], stdout=subprocess.PIPE)
    assert judge.stdout is not None
    judge_url = f"http://127.0.0.1:{judge.stdout.readline().decode().split()[1]}/v1"
    retries = ["--model.max-attempts", "5", "--model.backoff-initial-s", "1", "--model.backoff-max-s", "30"]
    guard, url = _guard(upstream, judge_url, db, *retries)
    try:
        up = [httpx.post(url + "/v1/chat/completions", json=BODY, timeout=60) for _ in range(3)]
        judge.kill()
        judge.wait()

        def timed(_: int) -> float:
            began = time.perf_counter()
            httpx.post(url + "/v1/chat/completions", json=BODY, timeout=60)
            return time.perf_counter() - began

        in_a_row = [timed(n) for n in range(20)]
        with ThreadPoolExecutor(20) as pool:
            at_once = list(pool.map(timed, range(20)))
    finally:
        guard.terminate()
        guard.wait()
    verified = [r.json()["verification"]["status"] for r in up]
    return f"judge: up {verified}; dead, 20 in a row {_ms(in_a_row)}; 20 at once {_ms(at_once)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", action="store_true", help="the nul phase on a throwaway PostgreSQL cluster")
    parser.add_argument("--phases", default="headers,nul,judge")
    args = parser.parse_args()
    phases = args.phases.split(",")
    with ExitStack() as stack:
        upstream_process, upstream = start_upstream(0.0, None)
        stack.callback(upstream_process.kill)
        folder = Path(tempfile.mkdtemp(prefix="guard-attack-"))
        db = f"sqlite:///{folder / 'desk.sqlite'}"
        if args.postgres:
            from tests.support.desk import fresh_database, postgres_cluster

            db = fresh_database(stack.enter_context(postgres_cluster()).url)
        said: list[str] = []
        if "headers" in phases or "nul" in phases:
            guard, url = _guard(upstream, upstream, db, "--debate", "later")
            try:
                if "headers" in phases:
                    said.append(headers_phase(url, guard.pid))
                if "nul" in phases:
                    said.append(nul_phase(url, db))
            finally:
                guard.terminate()
                guard.wait()
        if "judge" in phases:
            said.append(judge_phase(upstream, f"sqlite:///{folder / 'judge.sqlite'}"))
    print(json.dumps({"store": "postgresql" if args.postgres else "sqlite", "answer": ANSWER[:40]}))
    for line in said:
        print(line)


if __name__ == "__main__":
    main()
