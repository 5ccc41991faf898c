"""The guard under the faults a deployment meets: its PostgreSQL store restarting mid-traffic (answers go on, every
decision is written once it is back), and SIGTERM while a request is in flight (it finishes, its decision is kept,
one line says the guard stopped)."""

from __future__ import annotations

import json
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

            root = guard.base_url.removesuffix("/v1")
            ready: list[tuple[int, str]] = []
            stop = threading.Event()

            def watch() -> (
                None
            ):  # readiness asks the store itself: it says so while PostgreSQL is away, and stays ready
                while not stop.is_set():
                    answer = httpx.get(root + "/readyz", timeout=10)
                    ready.append((answer.status_code, answer.json()["store"]))
                    time.sleep(0.1)

            watcher = threading.Thread(target=watch)
            watcher.start()
            with ThreadPoolExecutor(4) as pool:
                codes = list(pool.map(send, range(80)))
            restart.join()
            stop.set()
            watcher.join()
            # issue 73: the guard answered every request through the restart, so a load balancer must not remove it
            assert (200, "the store does not answer") in ready and {code for code, _ in ready} == {200}, ready
            # the store back, not degraded: once the recorder's next write succeeds (its backoff may still be running
            # when the restart returns, so readiness turns ok a little later, never stays degraded)
            wait_for(lambda: httpx.get(root + "/readyz", timeout=10).json()["status"] == "ok", 30, "readiness ok")
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
            "--model.base-url",
            judge.base_url,
            "--model.model",
            "fake-model",
            "--prefilter.prefilters",
            "rules",
            "--debate.min-rounds",
            "0",
            "--debate.max-rounds",
            "0",
            "--log-format",
            "json",
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
    # every line of every process of the guard (its decision writer's too) in the log's format, the last one too
    records = [json.loads(line) for line in stderr.strip().splitlines()]
    assert all(set(r) == {"time", "level", "logger", "message"} for r in records), stderr
    assert records[-1]["message"] == "debate: terminated; 1 decision(s) stored, 0 not", stderr
    for noise in ("Traceback", "ERROR", "CancelledError"):
        assert noise not in stderr, stderr


def test_the_guard_starts_while_its_judge_is_down_and_takes_it_up_when_it_answers(
    guard_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started before its judge: the guard serves from the first request by --on-failure (open: the answer passed
    marked unverified, no address of the judge in what the caller reads), then verifies once the judge answers."""
    monkeypatch.setattr("markov_debate.guard.check.JUDGE_RETRY_S", 0.2)
    port = free_port()
    judge_url = f"http://127.0.0.1:{port}/v1"
    with FakeOpenAI(responder=lambda body: Reply(content=GOOD)) as upstream:
        guard = guard_for(upstream.base_url, judge_url)
        first = httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=30)
        assert first.status_code == 200, first.text
        said = first.json()["verification"]
        assert (said["status"], said["action"]) == ("unverified", "passed-unverified")
        assert first.json()["choices"][0]["message"]["content"] == GOOD
        assert str(port) not in first.text and "judge is not reachable" in " ".join(said["notes"])
        with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}, port=port):
            time.sleep(0.3)  # past the retry interval
            later = httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=30).json()["verification"]
        assert (later["status"], later["verdict"], later["action"]) == ("verified", "factual", "annotated")


def test_a_judge_outage_opens_the_breaker_and_a_probe_closes_it(
    guard_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge answering 503: three answers in a row fail on it, then the next ones go by --on-failure without
    asking it (no retry ladder each); once it answers again, one probe gets through and verification is back."""
    # 2 s: room for the five quick answers below on a loaded host, before the first probe may go.
    monkeypatch.setattr("markov_debate.guard.check.JUDGE_RETRY_S", 2.0)
    down = threading.Event()
    down.set()

    def judge_says(call: Any) -> Reply:
        return Reply(status=503, error_message="overloaded") if down.is_set() else Reply(content=op(True))

    with (
        FakeOpenAI(responder=lambda body: Reply(content=GOOD)) as upstream,
        FakeOpenAI(routes={"debate": judge_says}) as judge,
    ):
        guard = guard_for(upstream.base_url, judge.base_url)

        def ask() -> dict[str, Any]:
            answer = httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=30)
            assert answer.status_code == 200, answer.text
            found: dict[str, Any] = answer.json()["verification"]
            assert judge.base_url.split("//")[1].split("/")[0] not in answer.text  # no address of the judge
            return found

        first = [ask() for _ in range(3)]
        assert [f["action"] for f in first] == ["passed-unverified"] * 3
        asked = len(judge.calls)
        fast = [ask() for _ in range(5)]  # within the 2 s before the first probe
        assert len(judge.calls) == asked and {f["action"] for f in fast} == {"passed-unverified"}
        assert all("the judge is not reachable" in " ".join(f["notes"]) for f in fast)
        down.clear()
        time.sleep(2.1)
        assert ask()["status"] == "verified"  # the probe
        assert ask()["status"] == "verified" and len(judge.calls) > asked


def _retrying_judge(url: str) -> Any:
    """The judge as a user configures it for batch runs: five attempts, backoff from 1 s up to 30 s."""
    config = judge_config(url)
    model = config.model.model_copy(update={"max_attempts": 5, "backoff_initial_s": 1.0, "backoff_max_s": 30.0})
    return config.model_copy(update={"model": model})


def test_a_dying_judge_costs_a_caller_no_retry_ladder(guard_for: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The judge answers, then dies (its port refuses connections): with a judge configured for five attempts
    and backoff up to 30 s, each answer goes by --on-failure without one retry (no retry line at all), until the
    breaker stops asking; a caller waits no backoff step on a judge nothing answers for."""
    with FakeOpenAI(responder=lambda body: Reply(content=GOOD)) as upstream:
        with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}) as judge:
            guard = guard_for(upstream.base_url, judge.base_url, verifier=_retrying_judge(judge.base_url))
            alive = httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=30).json()["verification"]
            assert alive["status"] == "verified"
        with caplog.at_level("WARNING"):
            # 2 s each at most: the first backoff step alone (1 s with jitter, then 2 s) would be cut by it.
            dead = [httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=2.0) for _ in range(5)]
    assert [d.status_code for d in dead] == [200] * 5
    assert {d.json()["verification"]["action"] for d in dead} == {"passed-unverified"}
    assert not [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]


def test_a_failing_judge_gets_one_quick_retry_whatever_retry_after_it_asks(guard_for: Any) -> None:
    """A judge answering 503 with Retry-After: 30 is asked twice per call (one retry, its wait cut to a second),
    never five times 30 s: the caller's answer goes by --on-failure."""
    with (
        FakeOpenAI(responder=lambda body: Reply(content=GOOD)) as upstream,
        FakeOpenAI(
            routes={"debate": lambda call: Reply(status=503, error_message="busy", headers={"Retry-After": "30"})}
        ) as judge,
    ):
        guard = guard_for(upstream.base_url, judge.base_url, verifier=_retrying_judge(judge.base_url))
        asked = len(judge.calls)
        answer = httpx.post(guard.base_url + "/chat/completions", json=BODY, timeout=10)
        assert answer.json()["verification"]["action"] == "passed-unverified", answer.text
        tries: dict[str | None, list[float]] = {}
        for call, at in zip(judge.calls[asked:], judge.request_times[asked:], strict=True):
            tries.setdefault(call.site, []).append(at)
        # each claim's call: tried twice, the retry's wait cut to a second (not the 30 asked for)
        assert tries and all(len(t) == 2 and t[1] - t[0] < 1.5 for t in tries.values()), tries


def test_both_servers_answer_the_same_probes_to_get_and_head(guard_for: Any, tmp_path: Path) -> None:
    """/livez, /readyz, /healthz and /v1/health on the guard and the desk alike, GET and HEAD (a load balancer's
    check), without a key; HEAD has no body."""
    from tests.support.desk import ThreadedDesk, settings_for

    with FakeOpenAI(responder=lambda body: Reply(content=GOOD)) as model:
        guard = guard_for(model.base_url, model.base_url)
        settings = settings_for(f"sqlite:///{tmp_path}/probes.sqlite", model.base_url)
        with ThreadedDesk(settings) as desk:
            for root in (guard.base_url.removesuffix("/v1"), desk.url):
                for path in ("/livez", "/readyz", "/healthz", "/v1/health"):
                    got = httpx.get(root + path, timeout=10)
                    assert got.status_code == 200, (root, path, got.text)
                    head = httpx.head(root + path, timeout=10)
                    assert head.status_code == 200 and head.content == b"", (root, path)
                ready = httpx.get(root + "/readyz", timeout=10).json()
                assert ready["ready"] is True and ready["store"] == "ok", ready
