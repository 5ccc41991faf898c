"""The guard under the faults a deployment meets: its PostgreSQL store restarting mid-traffic (answers go on, every
decision is written once it is back), and SIGTERM while a request is in flight (it finishes, its decision is kept,
one line says the guard stopped)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.guard.conftest import GOOD, SOURCES, GuardServer, judge_config
from tests.support.desk import free_port, fresh_database, postgres_cluster, skip_without_postgres, wait_for
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import cli_env, op

pytestmark = pytest.mark.slow

BODY = {"model": "m", "messages": [{"role": "user", "content": "Capital?"}], "sources": SOURCES}


@pytest.fixture
def pg() -> Iterator[Any]:
    try:
        with postgres_cluster() as cluster:
            yield cluster
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        skip_without_postgres(exc)


def _stored(db_url: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM guard_decisions")).scalar_one())
    finally:
        engine.dispose()


def test_a_postgres_restart_loses_no_decision_postgres(pg: Any) -> None:
    from markov_debate.guard.settings import GuardSettings

    db_url = fresh_database(pg.url)
    judge = FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))})
    upstream = FakeOpenAI(responder=lambda body: Reply(content=GOOD))
    with judge, upstream:
        settings = GuardSettings(upstream=upstream.base_url, db_url=db_url, verifier=judge_config(judge.base_url))
        with GuardServer(settings) as guard:
            restart = threading.Thread(target=pg.restart, kwargs={"down_s": 3.0})

            def send(n: int) -> int:
                if n == 10:
                    restart.start()
                time.sleep(0.05)
                return httpx.post(f"{guard.base_url}/chat/completions", json=BODY, timeout=60).status_code

            with ThreadPoolExecutor(4) as pool:
                codes = list(pool.map(send, range(80)))
            restart.join()
    assert codes == [200] * 80  # answers went on while the store was away
    assert _stored(db_url) == 80  # and every decision was written once it was back


def test_sigterm_lets_the_request_in_flight_finish_and_keeps_its_decision(tmp_path: Path) -> None:
    judge = FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))})
    upstream = FakeOpenAI(responder=lambda body: Reply(content=GOOD, delay_s=1.5))
    db_url = f"sqlite:///{tmp_path / 'desk.sqlite'}"
    with judge, upstream:
        port = free_port()
        argv = [
            "debate",
            "guard",
            "--upstream",
            upstream.base_url,
            "--port",
            str(port),
            "--db",
            db_url,
            "--model.base_url",
            judge.base_url,
            "--model.model",
            "fake-model",
            "--prefilter.prefilters",
            "rules",
            "--debate.min_rounds",
            "0",
            "--debate.max_rounds",
            "0",
        ]
        guard = subprocess.Popen(argv, env=cli_env(), stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except OSError:
                    assert time.monotonic() < deadline and guard.poll() is None, "the guard did not start"
                    time.sleep(0.1)
            with ThreadPoolExecutor(1) as pool:
                answer = pool.submit(httpx.post, f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY, timeout=30)
                # the signal comes while the request is with the upstream (its answer takes 1.5 s), however long
                # the request took to get there on a loaded machine
                wait_for(lambda: upstream.calls, timeout=60, what="the request to reach the upstream")
                guard.send_signal(signal.SIGTERM)
                response = answer.result()
            _, stderr = guard.communicate(timeout=60)
        finally:
            if guard.poll() is None:
                guard.kill()
    assert response.status_code == 200 and response.json()["verification"]["verdict"] == "factual"
    assert guard.returncode == 143 and _stored(db_url) == 1
    assert stderr.strip().splitlines()[-1] == "debate: terminated; 1 decision(s) stored, 0 not", stderr
    for noise in ("Traceback", "ERROR", "CancelledError"):
        assert noise not in stderr, stderr
