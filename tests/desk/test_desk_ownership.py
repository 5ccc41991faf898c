"""Ownership over real HTTP: a submitter reads, cancels and retries only its own audits and batches (reviewers read
all, admins do all); a cancelled audit can be retried; replaying a cancelled audit's Idempotency-Key says so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from markov_debate.desk.auth import ApiKey, hash_key
from tests.support.desk import ThreadedDesk, api_keys, auth, jsonl, settings_for, wait_done
from tests.support.fakes import FakeOpenAI

AUDIT = {
    "question": "What is the capital of France?",
    "reference": "Paris is the capital of France.",
    "response": "The capital of France is Paris.",
}


@pytest.fixture
def desk(tmp_path: Path, model: FakeOpenAI) -> Iterator[ThreadedDesk]:
    keys = [*api_keys(), ApiKey(name="sue", role="submitter", sha256=hash_key("sue-secret-key"))]
    # no worker (jobs 0): audits stay pending, so each can be cancelled
    with ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/o.sqlite", model.base_url, keys=keys, jobs=0)) as server:
        yield server


def _sue(desk: ThreadedDesk) -> httpx.Client:
    return httpx.Client(base_url=desk.url, headers={"Authorization": "Bearer sue-secret-key"}, timeout=30)


def test_a_submitter_sees_and_acts_on_its_own_work_only(desk: ThreadedDesk) -> None:
    sam, sue = desk.client("sam"), _sue(desk)
    mine = sam.post("/v1/audits", json=AUDIT).json()["id"]
    ndjson = {"Content-Type": "application/x-ndjson"}
    made = sam.post(
        "/v1/batches?task=qa&name=nightly", content=jsonl([{"id": "1", **AUDIT}, {"id": "2", **AUDIT}]), headers=ndjson
    )
    assert made.status_code == 202, made.text
    batch = made.json()["id"]
    theirs = sue.post("/v1/audits", json=AUDIT).json()["id"]
    for method, path in [
        ("GET", f"/v1/audits/{mine}"),
        ("GET", f"/v1/audits/{mine}/report"),
        ("POST", f"/v1/audits/{mine}/cancel"),
        ("POST", f"/v1/audits/{mine}/retry"),
        ("GET", f"/v1/batches/{batch}"),
        ("POST", f"/v1/batches/{batch}/cancel"),
        ("POST", f"/v1/batches/{batch}/retry-failed"),
    ]:
        refused = sue.request(method, path)
        assert refused.status_code == 404, (method, path, refused.text)
        assert refused.json()["detail"] in (f"no audit {mine}", f"no batch {batch}")  # as if it did not exist
    assert [a["id"] for a in sue.get("/v1/audits").json()["items"]] == [theirs]
    assert sue.get("/v1/batches").json() == []
    assert sam.get(f"/v1/audits/{mine}").json()["status"] == "pending"  # sue's cancel did nothing
    assert sam.get(f"/v1/batches/{batch}").json()["counts"] == {"pending": 2}
    assert {a["id"] for a in sam.get("/v1/audits").json()["items"]} == {mine, mine + 1, mine + 2}
    # a reviewer reads everyone's; an admin acts on everyone's
    alice, root = desk.client("alice"), desk.client("root")
    assert alice.get(f"/v1/audits/{mine}").status_code == 200 and alice.get("/v1/audits").json()["total"] == 4
    assert len(alice.get("/v1/batches").json()) == 1
    assert root.post(f"/v1/batches/{batch}/cancel").json()["cancelled"] == 2
    assert root.post(f"/v1/audits/{theirs}/cancel").json()["status"] == "cancelled"
    # the pages keep the same rule
    with httpx.Client(base_url=desk.url, headers={"Accept": "text/html"}) as browser:
        assert browser.post("/login", data={"key": "sue-secret-key", "next": "/"}).status_code == 303
        assert browser.get(f"/audits/{mine}").status_code == 404
        assert browser.get(f"/batches/{batch}").status_code == 404
        listing = browser.get("/").text
        assert f'href="/audits/{theirs}"' in listing and f'href="/audits/{mine}"' not in listing


def test_a_cancelled_audit_can_be_retried_and_its_key_replay_says_it_was_cancelled(desk: ThreadedDesk) -> None:
    sam = desk.client("sam")
    key = {"Idempotency-Key": "nightly-17"}
    audit = sam.post("/v1/audits", json=AUDIT, headers=key).json()["id"]
    assert sam.post(f"/v1/audits/{audit}/cancel").json()["status"] == "cancelled"
    replay = sam.post("/v1/audits", json=AUDIT, headers=key)
    assert replay.status_code == 409
    assert replay.json() == {
        "detail": f"idempotency key 'nightly-17' belongs to audit {audit}, which was cancelled; "
        f"POST /v1/audits/{audit}/retry runs it again, or send a new key",
        "id": audit,
        "status": "cancelled",
    }
    retried = sam.post(f"/v1/audits/{audit}/retry")
    assert retried.status_code == 200 and retried.json()["status"] == "pending"
    events = [(e["kind"], e["detail"]) for e in sam.get(f"/v1/audits/{audit}").json()["events"]]
    assert events[-1] == ("requeued", "retried after it was cancelled")
    again = sam.post("/v1/audits", json=AUDIT, headers=key)  # the key's audit is back in the queue: a plain replay
    assert again.status_code == 202 and again.json()["id"] == audit and again.headers["Idempotent-Replayed"] == "true"
    refused = sam.post(f"/v1/audits/{audit}/retry")  # pending: nothing to retry
    assert refused.status_code == 409 and "only a failed or cancelled audit can be retried" in refused.json()["detail"]
    assert desk.client("alice").post(f"/v1/audits/{audit}/retry", headers=auth("alice")).status_code == 403


def test_a_submitter_sees_neither_worker_hosts_nor_the_endpoints_address(tmp_path: Path, model: FakeOpenAI) -> None:
    """Its own audit, its report, the list and the page: no worker name (host:pid), no endpoint URL, even in a
    deferral's reason; a reviewer sees both."""
    host, address = socket.gethostname(), model.base_url.removesuffix("/v1")
    settings = settings_for(f"sqlite:///{tmp_path}/v.sqlite", model.base_url, keys=api_keys())
    with ThreadedDesk(settings) as server:
        sam, alice = server.client("sam"), server.client("alice")
        audit_id = sam.post("/v1/audits", json=AUDIT).json()["id"]
        wait_done(sam, audit_id)
        worker = server.store.audit(audit_id).events[-1].actor
        hostport = address.removeprefix("http://")  # as connection errors print it: no scheme
        reason = f"the model endpoint is failing ({model.base_url}: connection refused by {hostport}); worker {worker}"
        with server.store.engine.begin() as conn:
            insert = "INSERT INTO events (audit_id, at, kind, actor, detail) VALUES (:a, :at, 'deferred', :w, :d)"
            conn.execute(text(insert), {"a": audit_id, "at": "2026-01-01", "w": worker, "d": reason})
        pages = [f"/v1/audits/{audit_id}", f"/v1/audits/{audit_id}/report", "/v1/audits"]
        for path in pages:
            shown = sam.get(path).text
            assert host not in shown and hostport not in shown, (path, shown[:300])
        page = sam.get(f"/audits/{audit_id}", headers={"Accept": "text/html"})
        assert page.status_code == 200 and host not in page.text and hostport not in page.text
        assert "(not shown to submitters)" in sam.get(f"/v1/audits/{audit_id}/report").text
        staff = alice.get(f"/v1/audits/{audit_id}").text
        assert host in staff and address in staff and hostport in staff
