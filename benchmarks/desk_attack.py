"""bench_desk's attack mode: hostile clients against `debate serve --jobs 0` at a 1,024 open-file limit while N
audits run through `debate worker` processes and the model endpoint goes down for a while. The attackers, all at
once and for the whole run: silent connections (a flood of sockets that send nothing), slow bodies (headers, then
a body byte every 3 s), slow raw uploads (a batch upload's headers and 2 KB, then a byte every 3 s), cut-off
bodies (half a body, then the connection closed, many a second), multipart bodies (8 file parts of 1.05 MB to the
sign-in and submit forms at 2 KB/s, above the minimum rate) and large JSON (9.8 MB bodies to a review route, sent
at full speed, again and again). Each attacker reopens what the server closes. The run is made twice per store:
the attackers without a key, then with an admin key of their own (the audits always come from another key).

Prints, per run: health's p50 / p99 / max while it lasts (and how many health requests got no answer), the server's
most open files (of its limit of 1,024) and its resident memory at the start and at most, the audits done /
duplicated / lost / failed, and the server log's size and its "Too many open files" count.

    python benchmarks/bench_desk.py --attack --audits 200 --outage-s 30
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from markov_debate.desk.auth import hash_key

SILENT, SLOW_BODIES, SLOW_UPLOADS, CUT_OFF_PER_S, MULTIPART, LARGE_JSON = 600, 300, 60, 20, 130, 4
KEY = "mdk_bench-attack-submitter-key"
ATTACKER_KEY = "mdk_bench-attack-mallory-key"
"""The attackers' own key in the keyed run (an admin: every route is open to it)."""
_PART = b'--XX\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n\r\n' + b"a" * 1_100_000 + b"\r\n"


def _own_file_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))


def _head(path: str, length: int, content_type: str, key: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n"
        f"{auth}\r\n"
    ).encode()


class Attack:
    """The attackers, each a thread that keeps its sockets open (reopening what the server closes) until stopped;
    with `key`, every attacker sends it."""

    def __init__(self, port: int, key: str | None = None) -> None:
        self.port = port
        self.key = key
        self.stop = threading.Event()
        self.opened = 0
        self.refused = 0
        multipart = "multipart/form-data; boundary=XX"
        self.threads = [
            threading.Thread(target=self._hold, args=(SILENT, b"", 0.0), daemon=True),
            threading.Thread(
                target=self._hold,
                args=(SLOW_BODIES, _head("/v1/audits", 100_000, "application/json", key), 3.0),
                daemon=True,
            ),
            threading.Thread(
                target=self._hold,
                args=(
                    SLOW_UPLOADS,
                    _head("/v1/batches?task=qa", 5_000_000, "application/x-ndjson", key) + b" " * 2048,
                    3.0,
                ),
                daemon=True,
            ),
            threading.Thread(target=self._cut_off, daemon=True),
            *(
                threading.Thread(
                    target=self._hold,
                    args=(MULTIPART // 2, _head(path, 8 * len(_PART), multipart, key) + _PART[:2048], 1.0, 2048),
                    daemon=True,
                )
                for path in ("/login", "/submit" if key is None else "/v1/batches?task=qa")
            ),
            *(threading.Thread(target=self._large_json, daemon=True) for _ in range(LARGE_JSON)),
        ]

    def __enter__(self) -> Attack:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _connect(self, head: bytes) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.setblocking(False)
            if head:
                sock.sendall(head)
            self.opened += 1
            return sock
        except OSError:
            self.refused += 1
            return None

    def _hold(self, count: int, head: bytes, every_s: float, chunk: int = 1) -> None:
        sockets: list[socket.socket | None] = [None] * count
        while not self.stop.is_set():
            for i, sock in enumerate(sockets):
                if sock is not None and every_s:
                    try:
                        sock.send(b" " * chunk)
                    except OSError:  # closed by the server: open another
                        sock.close()
                        sock = None
                elif sock is not None and _closed(sock):
                    sock.close()
                    sock = None
                sockets[i] = sock if sock is not None else self._connect(head)
            self.stop.wait(every_s or 1.0)
        for sock in sockets:
            if sock is not None:
                sock.close()

    def _cut_off(self) -> None:
        head = _head("/v1/audits", 100_000, "application/json") + b'{"question": "' + b"x" * 1000
        while not self.stop.is_set():
            sock = self._connect(head)
            if sock is not None:
                sock.close()
            self.stop.wait(1 / CUT_OFF_PER_S)

    def _large_json(self) -> None:
        """9.8 MB bodies to a review route as fast as the server takes them (what it answers is read and dropped)."""
        body = b'{"decision": "confirm", "note": "' + b"n" * 9_800_000 + b'"}'
        head = _head("/v1/audits/1/claims/c0/reviews", len(body), "application/json", self.key)
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
                    self.opened += 1
                    sock.sendall(head + body)
                    while sock.recv(65536):
                        pass
            except OSError:  # refused, or closed before the body was sent (the point of the gate)
                self.refused += 1
                self.stop.wait(0.05)


class Resources:
    """The server's open files and resident memory, sampled every 0.5 s."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process = psutil.Process(pid)
        self.rss_start_mb = self.process.memory_info().rss / 2**20
        self.files_max = self.process.num_fds()
        self.rss_max_mb = self.rss_start_mb
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                self.files_max = max(self.files_max, self.process.num_fds())
                self.rss_max_mb = max(self.rss_max_mb, self.process.memory_info().rss / 2**20)
            except Exception:  # the server ended (closing): the figures so far stand
                return


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Health:
    """GET /v1/health every 0.2 s: the time each took, and how many got no answer within 10 s."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[float] = []
        self.unanswered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=10) as response:
                    response.read()
                self.samples.append(time.monotonic() - started)
            except urllib.error.HTTPError:  # 503 in an outage: an answer all the same
                self.samples.append(time.monotonic() - started)
            except OSError:
                self.unanswered += 1
            self.stop.wait(0.2)


def run_attack(
    store: str, db_url: str, args: argparse.Namespace, folder: Path, bench: Any, *, keyed: bool = False
) -> dict[str, Any]:
    """One run on `db_url` (the attackers with a key of their own when `keyed`); `bench` is bench_desk (its Desk,
    fake endpoint and store counts)."""
    _own_file_limit(4096)
    engine = create_engine(db_url, pool_pre_ping=True)
    with bench._fake_endpoint(args.latency_ms) as endpoint:
        # the attackers have no key (they share the "anonymous" quota); the audits come from a key of their own
        keys = folder / "keys.txt"
        keys.write_text(f"bench:submitter:sha256:{hash_key(KEY)}\nmallory:admin:sha256:{hash_key(ATTACKER_KEY)}\n")
        server_args = ("--api-keys-file", str(keys))
        desk = bench.Desk(db_url, endpoint, args.workers, args.jobs, folder, server_files=1024, server_args=server_args)
        items = [
            {"id": str(i), "question": "Capital of France?", "response": f"Paris ({i}).", "reference": "Paris."}
            for i in range(args.audits)
        ]
        body = "".join(json.dumps(item) + "\n" for item in items).encode()
        started = time.monotonic()
        health = Health(desk.url)
        assert desk.server is not None
        resources = Resources(desk.server.pid)
        try:
            with Attack(desk.port, ATTACKER_KEY if keyed else None) as attack:
                time.sleep(5)  # the attackers at full strength before any audit
                bench._post(desk.url + "/v1/batches?task=qa&name=attack", body, "application/x-ndjson", KEY)
                outage_done = False
                deadline = time.monotonic() + args.timeout_s
                while time.monotonic() < deadline:
                    counts = bench._counts(engine)
                    finished = sum(counts.get(k, 0) for k in ("done", "failed", "cancelled"))
                    if finished >= args.audits:
                        break
                    if not outage_done and finished >= 0.2 * args.audits:
                        print(f"  [{store}] {finished} finished: endpoint outage for {args.outage_s:g} s", flush=True)
                        bench._get(endpoint + "/outage/on")
                        time.sleep(args.outage_s)
                        bench._get(endpoint + "/outage/off")
                        outage_done = True
                    time.sleep(0.5)
                wall = time.monotonic() - started
                opened, refused = attack.opened, attack.refused
        finally:
            health.stop.set()
            health.thread.join(15)
            resources.stop.set()
            resources.thread.join(15)
            desk.close()
    counts = bench._counts(engine)
    samples = sorted(health.samples) or [float("nan")]
    log = (folder / "server.log").read_text(errors="replace")
    return {
        "store": store,
        "attackers": "with a key" if keyed else "no key",
        "wall_s": round(wall, 1),
        "health_p50_ms": round(1000 * statistics.median(samples), 1),
        "health_p99_ms": round(1000 * samples[min(len(samples) - 1, int(0.99 * len(samples)))], 1),
        "health_max_ms": round(1000 * samples[-1], 1),
        "health_unanswered": health.unanswered,
        "files_max": resources.files_max,
        "rss_start_mb": round(resources.rss_start_mb),
        "rss_max_mb": round(resources.rss_max_mb),
        "attack_connections": opened,
        "done": counts.get("done", 0),
        "duplicated": bench._duplicated(engine),
        "lost": args.audits - sum(counts.get(k, 0) for k in ("done", "failed", "cancelled")),
        "failed": counts.get("failed", 0),
        "log_kb": round(len(log.encode()) / 1024, 1),
        "emfile": log.count("Too many open files"),
        "refused_connects": refused,
    }
