"""Health as a supervisor and an attacker see it (issue 37): without a key, states and counts only; the causes
(error texts that may name hosts) for admins; a long endpoint outage is 503 with the reason; a store written by a
newer version is refused in one line; wrong keys are throttled per client, whatever X-Forwarded-For says."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from markov_debate.desk.store import Store, StoreError
from tests.support.desk import (
    DeskProcess,
    ThreadedDesk,
    api_keys,
    free_port,
    settings_for,
    verdicts,
    wait_done,
    wait_for,
)
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import cli_env

pytestmark = pytest.mark.slow  # serves the desk on a loopback port


def test_health_shows_causes_to_admins_only_and_a_long_outage_is_503(tmp_path: Path) -> None:
    # Nothing listens on port 9 (the discard port; no test server gets it from the ephemeral range): the endpoint is
    # down from the start and stays down. A port from free_port() could be taken by another xdist worker's server
    # during the retry ladder, which then answers the worker's next try.
    down = "http://127.0.0.1:9/v1"
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", down, keys=api_keys(), outage_s=1.0, breaker_max_s=0.5)
    with ThreadedDesk(settings) as desk:
        anonymous, admin = desk.client(), desk.client("root")
        wait_for(lambda: anonymous.get("/v1/health").json()["worker"]["state"] == "endpoint-down", what="down")
        outage = wait_for(lambda: (h := anonymous.get("/v1/health")).status_code == 503 and h, what="outage 503")
        shown = outage.json()
        assert shown["problem"].startswith("the model endpoint has been down for ") and "127.0.0.1" not in outage.text
        assert "last_error" not in shown["worker"] and shown["details"] == "causes are shown to admins"
        assert set(shown["queue"]) == {"due", "oldest_due_s", "last_activity_s"}
        detailed = admin.get("/v1/health")
        assert detailed.status_code == 503 and "127.0.0.1" in detailed.json()["worker"]["last_error"]
        assert "127.0.0.1" in detailed.json()["problem"] and "details" not in detailed.json()


def test_a_store_from_a_newer_version_is_refused_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/newer.sqlite"
    store = Store(url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    store.close()
    with pytest.raises(StoreError, match=r"schema is at revision 0099, which this version .* knows up to 0008"):
        Store(url)
    for command in (["serve", "--port", str(free_port())], ["worker"]):
        words = [*command, "--db", url, "--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "m"]
        run = [sys.executable, "-m", "debate.cli", *words]
        done = subprocess.run(run, capture_output=True, text=True, env=cli_env(), timeout=60)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and "revision 0099" in lines[0], done.stderr


def test_wrong_bearer_keys_are_throttled_and_x_forwarded_for_buys_no_fresh_count(tmp_path: Path) -> None:
    """Five wrong keys from one client, at the form or in a header, then 429 with Retry-After for a wrong key (on
    the API and on the pages); a spoofed X-Forwarded-For from a client that is not a configured proxy changes
    nothing; a right key still passes."""
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in api_keys()))
    with DeskProcess(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", "--api-keys-file", str(keys)) as desk:
        for attempt in range(5):
            wrong = httpx.get(desk.url + "/v1/audits", headers={"Authorization": f"Bearer guess-{attempt}"})
            assert wrong.status_code == 401
        for spoofed in ({}, {"X-Forwarded-For": "203.0.113.9"}):
            throttled = httpx.get(desk.url + "/v1/audits", headers={"Authorization": "Bearer guess", **spoofed})
            assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) > 0, throttled.text
        page = httpx.get(desk.url + "/", headers={"Authorization": "Bearer guess", "Accept": "text/html"})
        assert page.status_code == 429 and "Retry-After" in page.headers and "too many failed" in page.text
        # a valid key and the health check from the same address are not throttled (issue 44)
        right = httpx.get(desk.url + "/v1/audits", headers={"Authorization": "Bearer alice-secret-key"})
        assert right.status_code == 200, right.text
        assert httpx.get(desk.url + "/v1/health").status_code in (200, 503)


def test_a_server_without_its_own_worker_sees_a_long_outage_through_the_store(tmp_path: Path) -> None:
    """`debate serve --jobs 0` with separate workers: the server has no worker state to read, so the store's trail
    (audits deferred, none finished) is what makes its health 503 during a long endpoint outage."""
    down = threading.Event()

    def endpoint(call: Call) -> Reply:
        return Reply(status=503, error_message="upstream overloaded at 10.1.2.3") if down.is_set() else verdicts(call)

    url = f"sqlite:///{tmp_path}/d.sqlite"
    with FakeOpenAI(routes={"debate": endpoint}) as model:
        common: dict[str, Any] = {"keys": api_keys(), "outage_s": 2.0, "breaker_max_s": 0.5, "max_attempts": 50}
        with (
            ThreadedDesk(settings_for(url, model.base_url, jobs=2, **common)) as workers,
            ThreadedDesk(settings_for(url, model.base_url, jobs=0, **common)) as server,
        ):
            sam, anonymous, admin = workers.client("sam"), server.client(), server.client("root")
            body = {"question": "Capital of France?", "reference": "Paris is the capital of France."}
            first = sam.post("/v1/audits", json={**body, "response": "Paris."}).json()["id"]
            assert wait_done(sam, first)["status"] == "done"
            healthy = anonymous.get("/v1/health")
            assert healthy.status_code == 200 and "worker" not in healthy.json()  # no in-process worker here
            down.set()
            sam.post("/v1/audits", json={**body, "response": "It is Paris."})
            outage = wait_for(lambda: (h := anonymous.get("/v1/health")).status_code == 503 and h, what="503")
            problem = outage.json()["problem"]
            assert problem.startswith("audits have been deferred for ") and "none finished" in problem
            assert "10.1.2.3" not in outage.text  # the cause is for admins
            assert "10.1.2.3" in admin.get("/v1/health").json()["problem"]
            down.clear()  # the endpoint is back: the audit finishes and health recovers
            wait_for(lambda: anonymous.get("/v1/health").status_code == 200, timeout=60, what="recovery")
