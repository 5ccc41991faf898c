"""The audit desk under load and faults, with real processes: N audits through `debate serve --jobs 0` and K
`debate worker` processes, on SQLite and on a PostgreSQL server it starts, against the fake endpoint (50 ms a
call). During the run: kill -9 of a worker (a replacement starts), kill -9 of the server (restarted), an endpoint
outage, and (PostgreSQL) a database restart. Prints audits/s, the API's p50/p99 latency during the run, and how
many audits ended done / duplicated (finished twice) / lost (never finished) / failed. With --large-store N, it
instead builds a store of N finished audits and prints the read routes' p50/p99 and the server's memory on it
(desk_large_store.py).

    python benchmarks/bench_desk.py                                   # 2,000 audits, 2 workers, 4-minute outage
    python benchmarks/bench_desk.py --audits 400 --outage-s 60 --stores sqlite
    python benchmarks/bench_desk.py --large-store 10000 --claims 25   # the queue and lists on a large store
    python benchmarks/bench_desk.py --attack --audits 200 --outage-s 30  # hostile clients meanwhile (desk_attack.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, timeout: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def _post(url: str, body: bytes, content_type: str, key: str | None = None) -> Any:
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


@contextmanager
def _fake_endpoint(latency_ms: float) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "fake_endpoint.py"), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().split()[1])
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


class Desk:
    """The server and its workers as processes, each of which can be killed and started again."""

    def __init__(
        self,
        db_url: str,
        endpoint: str,
        workers: int,
        jobs: int,
        folder: Path,
        server_files: int | None = None,
        server_args: tuple[str, ...] = (),
    ) -> None:
        self.db_url, self.endpoint, self.folder = db_url, endpoint, folder
        self.server_files, self.server_args = server_files, server_args
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.jobs = jobs
        self.env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
        self.common = [
            "--model.base-url",
            endpoint + "/v1",
            "--model.model",
            "fake-model",
            "--model.max-concurrency",
            str(jobs),
            "--lease",
            "10",
            "--cache",
            str(folder / "cache"),
        ]
        self.server: subprocess.Popen[bytes] | None = None
        self.workers = [self._worker(i) for i in range(workers)]
        self.start_server()

    def _spawn(self, argv: list[str], log: str, files: int | None = None) -> subprocess.Popen[bytes]:
        out = (self.folder / log).open("ab")

        def limit() -> None:
            if files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

        return subprocess.Popen(["debate", *argv], env=self.env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit)

    def _worker(self, index: int) -> subprocess.Popen[bytes]:
        return self._spawn(
            ["worker", "--db", self.db_url, "--jobs", str(self.jobs), *self.common], f"worker{index}.log"
        )

    def start_server(self) -> None:
        self.server = self._spawn(
            ["serve", "--db", self.db_url, "--jobs", "0", "--port", str(self.port), *self.common, *self.server_args],
            "server.log",
            self.server_files,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(self.url + "/v1/health", timeout=2)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()

    def kill_worker(self, index: int) -> None:
        self.workers[index].send_signal(signal.SIGKILL)
        self.workers[index].wait()
        self.workers[index] = self._worker(index)

    def close(self) -> None:
        for proc in [*self.workers, self.server]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in [*self.workers, self.server]:
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


class Latency:
    """Polls two read routes every 0.2 s while the run goes on; the server's restarts are excluded."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for path in ("/v1/health", "/v1/audits?per_page=1"):
                started = time.monotonic()
                try:
                    _get(self.desk.url + path, timeout=10)
                except OSError:
                    continue  # the server is being restarted: no latency to measure
                self.samples.append(time.monotonic() - started)
            time.sleep(0.2)


def _counts(engine: Any) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, count(*) FROM audits GROUP BY status")).all()
    return {str(status): int(n) for status, n in rows}


def _duplicated(engine: Any) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT audit_id FROM events WHERE kind = 'finished' GROUP BY audit_id "
                    "HAVING count(*) > 1) AS twice"
                )
            ).scalar()
            or 0
        )


def run(store: str, db_url: str, args: argparse.Namespace, folder: Path, restart_db: Any) -> dict[str, Any]:
    engine = create_engine(db_url, pool_pre_ping=True)  # it outlives the database restart it causes
    with _fake_endpoint(args.latency_ms) as endpoint:
        desk = Desk(db_url, endpoint, args.workers, args.jobs, folder)
        latency = Latency(desk)
        started = time.monotonic()
        outage_s = 0.0
        try:
            items = [
                {
                    "id": str(i),
                    "question": "What is the capital of France?",
                    "response": f"Paris is the capital of France ({i}).",
                    "reference": "Paris is the capital of France.",
                }
                for i in range(args.audits)
            ]
            for first in range(0, len(items), 500):
                chunk = "".join(json.dumps(item) + "\n" for item in items[first : first + 500]).encode()
                _post(desk.url + "/v1/batches?task=qa&name=bench", chunk, "application/x-ndjson")
            events = [
                (0.2, "kill -9 a worker"),
                (0.4, "kill -9 the server"),
                (0.55, "endpoint outage"),
                (0.75, "database restart"),
            ]
            deadline = time.monotonic() + args.timeout_s
            while time.monotonic() < deadline:
                counts = _counts(engine)
                finished = sum(counts.get(k, 0) for k in ("done", "failed", "cancelled"))
                if finished >= args.audits:
                    break
                while events and finished >= events[0][0] * args.audits:
                    _, what = events.pop(0)
                    print(f"  [{store}] {time.monotonic() - started:6.1f} s, {finished} finished: {what}", flush=True)
                    if what == "kill -9 a worker":
                        desk.kill_worker(0)
                    elif what == "kill -9 the server":
                        desk.kill_server()
                        desk.start_server()
                    elif what == "endpoint outage":
                        _get(endpoint + "/outage/on")
                        time.sleep(args.outage_s)
                        _get(endpoint + "/outage/off")
                        outage_s = args.outage_s
                    elif restart_db is not None:
                        restart_db()
                time.sleep(0.5)
            wall = time.monotonic() - started
        finally:
            latency.stop.set()
            desk.close()
    counts = _counts(engine)
    samples = sorted(latency.samples) or [float("nan")]
    done = counts.get("done", 0)
    return {
        "store": store,
        "audits": args.audits,
        "wall_s": round(wall, 1),
        "audits_per_s": round(done / max(wall - outage_s, 1e-9), 2),
        "api_p50_ms": round(1000 * statistics.median(samples), 1),
        "api_p99_ms": round(1000 * samples[min(len(samples) - 1, int(0.99 * len(samples)))], 1),
        "done": done,
        "duplicated": _duplicated(engine),
        "lost": args.audits - sum(counts.get(k, 0) for k in ("done", "failed", "cancelled")),
        "failed": counts.get("failed", 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audits", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2, help="`debate worker` processes")
    parser.add_argument("--jobs", type=int, default=8, help="audits each worker runs at once")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--outage-s", type=float, default=240.0, help="endpoint outage length")
    parser.add_argument("--db-down-s", type=float, default=8.0, help="PostgreSQL restart: seconds down")
    parser.add_argument("--stores", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--timeout-s", type=float, default=3600.0)
    parser.add_argument("--large-store", type=int, default=0, metavar="N", help="the large-store mode: N audits")
    parser.add_argument("--claims", type=int, default=25, help="large-store mode: claims per audit")
    parser.add_argument("--repeats", type=int, default=100, help="large-store mode: requests per route")
    parser.add_argument("--attack", action="store_true", help="the attack mode (desk_attack.py)")
    args = parser.parse_args()
    if shutil.which("debate") is None:
        raise SystemExit("bench_desk: the debate command is not installed (pip install -e '.[desk]')")
    results = []
    for store in args.stores:
        with ExitStack() as stack:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-desk-")))
            if store == "sqlite":
                url, restart = f"sqlite:///{folder}/desk.sqlite", None
            else:
                from tests.support.desk import postgres_cluster

                cluster = stack.enter_context(postgres_cluster())
                url, restart = cluster.url, lambda c=cluster: c.restart(args.db_down_s)
            if args.large_store:
                from desk_large_store import run_large

                run_large(store, url, args, folder, Desk, _fake_endpoint)
                continue
            if args.attack:
                from desk_attack import run_attack

                for keyed in (False, True):
                    run_folder = folder / ("keyed" if keyed else "keyless")
                    run_folder.mkdir()
                    run_url = url
                    if store == "sqlite":
                        run_url = f"sqlite:///{run_folder}/desk.sqlite"
                    elif keyed:
                        from tests.support.desk import fresh_database

                        run_url = fresh_database(cluster.url)
                    results.append(run_attack(store, run_url, args, run_folder, sys.modules[__name__], keyed=keyed))
                continue
            results.append(run(store, url, args, folder, restart))
    if args.large_store:
        return 0
    if args.attack:
        return _attack_table(results, args)
    print(
        f"\n{args.audits} audits, {args.workers} workers x {args.jobs} jobs, endpoint {args.latency_ms:.0f} ms/call, "
        f"outage {args.outage_s:.0f} s (audits/s leaves the outage out)"
    )
    keys = ["store", "wall_s", "audits_per_s", "api_p50_ms", "api_p99_ms", "done", "duplicated", "lost", "failed"]
    print(" | ".join(keys))
    for row in results:
        print(" | ".join(str(row[k]) for k in keys))
    return 0 if all(r["duplicated"] == 0 and r["lost"] == 0 for r in results) else 1


def _attack_table(results: list[dict[str, Any]], args: argparse.Namespace) -> int:
    print(
        f"\n{args.audits} audits, {args.workers} workers x {args.jobs} jobs, outage {args.outage_s:.0f} s, under "
        "attack (server at a 1,024 open-file limit)"
    )
    keys = list(results[0]) if results else []
    print(" | ".join(keys))
    for row in results:
        print(" | ".join(str(row[k]) for k in keys))
    clean = all(r["duplicated"] == 0 and r["lost"] == 0 and r["failed"] == 0 for r in results)
    # the targets of issue 63: health p99 under 2 s, under 90% of the server's 1,024 files
    held = all(r["health_p99_ms"] < 2000 and r["files_max"] < 0.9 * 1024 for r in results)
    print("targets (health p99 < 2 s, files < 90% of 1,024):", "held" if held else "MISSED")
    return 0 if clean and held else 1


if __name__ == "__main__":
    sys.exit(main())
