"""Helpers for the audit desk's tests: the desk on a real port (in a thread, or as a `debate serve` process) over
the scripted model endpoint, and a real PostgreSQL server started for the session."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text

from debate.config import ModelConfig, VerifierConfig
from markov_debate.desk.app import create_app
from markov_debate.desk.auth import ApiKey, hash_key
from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import GuardRecord
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import cli_env, op, sigint_default

WRONG = "Lyon"
"""A response containing this word is judged non-factual by the scripted endpoint (every agent agrees)."""


def verdicts(call: Call) -> Reply:
    """The debate route: every agent says false when the claim under debate mentions Lyon, true otherwise."""
    text = " ".join(str(m.get("content", "")) for m in call.body["messages"] if m.get("role") == "user")
    return Reply(content=op(False, 4, "the reference says Paris") if WRONG in text else op(True, 0, "supported"))


@contextmanager
def fake_model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(routes={"debate": verdicts}) as server:
        yield server


def guard_record(n: int, action: str = "annotated", *, policy: str = "annotate") -> GuardRecord:
    """A decision of the guard on a RAG answer, as its writer hands it to the store (request id guard-N)."""
    request = AuditRequest(task="rag", response=f"Answer {n} [a].", question="q", reference={"a": "text"})
    return GuardRecord(
        request=request,
        request_id=f"guard-{n}",
        caller="anonymous",
        at=datetime.now(UTC).replace(tzinfo=None),
        route=None,
        policy=policy,
        action=action,
        status="unverified",
        risk=None,
        verification_json="{}",
        report=None,
        finished=False,
    )


KEYS = {
    "alice": ("reviewer", "alice-secret-key"),
    "sam": ("submitter", "sam-secret-key"),
    "root": ("admin", "root-secret-key"),
}


def api_keys() -> list[ApiKey]:
    return [ApiKey(name=n, role=r, sha256=hash_key(k)) for n, (r, k) in KEYS.items()]


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name][1]}"}


def settings_for(db_url: str, base_url: str, **changes: Any) -> DeskSettings:
    verifier = VerifierConfig(
        model=ModelConfig(base_url=base_url, model="fake-model", api_key="sk-endpoint-secret-0123", max_concurrency=4)
    )
    values: dict[str, Any] = {
        "db_url": db_url,
        "verifier": verifier,
        "lease_s": 3.0,
        "poll_s": 0.1,
        "session_secret": "test-secret",
    }
    values.update(changes)
    return DeskSettings(**values)


class ThreadedDesk:
    """The desk app on a real loopback port, served by uvicorn in a thread (lifespan on: the worker runs)."""

    def __init__(self, settings: DeskSettings) -> None:
        self.app = create_app(settings)
        self.store = self.app.state.store
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="error"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def client(self, name: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=auth(name) if name else {}, timeout=30)

    def __enter__(self) -> ThreadedDesk:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the desk did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self.store.close()


def wait_for(predicate: Any, timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_done(client: httpx.Client, audit_id: int, timeout: float = 30) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(f"/v1/audits/{audit_id}").json()
        return body if body["status"] in ("done", "failed", "cancelled") else None

    result: dict[str, Any] = wait_for(finished, timeout, f"audit {audit_id}")
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DeskProcess:
    """`debate serve` as a user runs it, in its own process (so a test can kill it with SIGKILL)."""

    def __init__(self, db_url: str, base_url: str, *extra: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.args = [
            sys.executable,
            "-m",
            "debate.cli",
            "serve",
            "--port",
            str(self.port),
            "--db",
            db_url,
            "--model.base-url",
            base_url,
            "--model.model",
            "fake-model",
            "--lease",
            "2",
            *extra,
        ]
        self.env = {**cli_env(), "OPENAI_API_KEY": "sk-endpoint-secret-0123", **(env or {})}
        self.process: subprocess.Popen[str] | None = None
        self.log = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> DeskProcess:
        self.process = subprocess.Popen(
            self.args,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=sigint_default,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"debate serve exited: {self.process.stdout.read() if self.process.stdout else ''}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("debate serve did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._collect()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._collect()

    def _collect(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.log += self.process.stdout.read()
            self.process.stdout.close()

    def __enter__(self) -> DeskProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _file_limit(n: int) -> Any:
    def limit() -> None:
        sigint_default()
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return limit


@contextmanager
def served(folder: Path, *extra: str, files: int = 1024, db_url: str | None = None) -> Iterator[tuple[str, Path]]:
    """`debate serve --jobs 0` in its own process at an open-file limit of `files`, its log in a file (a flood of
    log lines can never fill a pipe and stall it); (its URL, the log's path)."""
    port = free_port()
    log = folder / f"desk-{port}.log"
    args = [sys.executable, "-m", "debate.cli", "serve", "--port", str(port), "--jobs", "0"]
    args += ["--db", db_url or f"sqlite:///{folder}/desk-{port}.db", "--model.base-url", "http://127.0.0.1:9/v1"]
    args += ["--model.model", "m", *extra]
    with log.open("w") as out:
        process = subprocess.Popen(
            args, env=cli_env(), stdout=out, stderr=subprocess.STDOUT, preexec_fn=_file_limit(files)
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, log
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


def fresh_database(server_url: str) -> str:
    """A new empty database on the server at `server_url`; its URL."""
    name = "desk_" + uuid.uuid4().hex[:10]
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return server_url.rsplit("/", 1)[0] + "/" + name


def _pg_bin() -> Path | None:
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / "initdb").exists():
            return folder
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@dataclass
class PgCluster:
    """A running throwaway cluster: its URL, and a restart as an operator would do one."""

    url: str
    _ctl: list[str]

    def restart(self, down_s: float) -> None:
        """Stop the server (fast shutdown: connections are cut), wait `down_s`, start it again."""
        subprocess.run([*self._ctl, "-m", "fast", "-w", "stop"], check=True, capture_output=True)
        time.sleep(down_s)
        subprocess.run([*self._ctl, "-w", "start"], check=True, capture_output=True)


def skip_without_postgres(exc: FileNotFoundError | subprocess.CalledProcessError) -> NoReturn:
    """Skip the test when no PostgreSQL server can be started here; fail instead where one must (CI sets
    DEBATE_REQUIRE_POSTGRES)."""
    if os.environ.get("DEBATE_REQUIRE_POSTGRES"):
        raise exc
    detail = exc.stderr if isinstance(exc, subprocess.CalledProcessError) else exc
    pytest.skip(f"no PostgreSQL server could be started here ({detail}); CI installs one")


@contextmanager
def postgres_server() -> Iterator[str]:
    with postgres_cluster() as cluster:
        yield cluster.url


@contextmanager
def postgres_cluster() -> Iterator[PgCluster]:
    """A throwaway PostgreSQL cluster on a free loopback port; yields its SQLAlchemy URL. As root (CI), the server
    runs as the `postgres` user, because PostgreSQL refuses to run as root (so its folder is not under pytest's
    root-only temporary directory)."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    base = Path(tempfile.mkdtemp(prefix="desk-pg-"))
    data = base / "pgdata"
    data.mkdir(parents=True)
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(data, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    run = {"check": True, "capture_output": True, "text": True}
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], **run
    )  # type: ignore[call-overload]
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "pg.log"), "-w", "start"],
        **run,
    )  # type: ignore[call-overload]
    try:
        subprocess.run(
            [*prefix, str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "desk"], **run
        )  # type: ignore[call-overload]
        ctl = [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "pg.log")]
        yield PgCluster(f"postgresql+psycopg://postgres@127.0.0.1:{port}/desk", ctl)
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)


def jsonl(items: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(i) + "\n" for i in items).encode()
