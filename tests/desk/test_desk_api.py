"""The audit desk's HTTP API over real HTTP (uvicorn on 127.0.0.1) with the scripted model endpoint: every route,
the auth rules, CSRF, escaping, limits, idempotency, cancellation and that no secret reaches the store."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from experiments.dynamics.readers import read_log
from markov_debate.desk.store import Store, StoreError
from tests.support.desk import (
    WRONG,
    ThreadedDesk,
    api_keys,
    jsonl,
    settings_for,
    wait_done,
    wait_for,
)
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import REFCHECKER_EXAMPLE, debate
from tests.support.oracles import check_stats

FRANCE = {"question": "What is the capital of France?", "reference": "Paris is the capital of France."}
RIGHT = {**FRANCE, "response": "The capital of France is Paris."}
WRONG_ANSWER = {**FRANCE, "response": f"The capital of France is {WRONG}."}


@pytest.fixture
def desk(tmp_path: Path, model: FakeOpenAI) -> Iterator[ThreadedDesk]:
    with ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/desk.sqlite", model.base_url)) as server:
        yield server


def submit(client: httpx.Client, body: dict[str, Any], **headers: str) -> int:
    response = client.post("/v1/audits", json=body, headers=headers)
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def test_submit_run_and_read_back(desk: ThreadedDesk) -> None:
    client = desk.client()
    first = submit(client, WRONG_ANSWER, **{"Idempotency-Key": "k-1"})
    replay = client.post("/v1/audits", json=WRONG_ANSWER, headers={"Idempotency-Key": "k-1"})
    assert replay.status_code == 202 and replay.json()["id"] == first
    assert replay.headers["Idempotent-Replayed"] == "true"
    conflict = client.post("/v1/audits", json=RIGHT, headers={"Idempotency-Key": "k-1"})
    assert conflict.status_code == 409 and "different request" in conflict.json()["detail"]
    second = submit(client, RIGHT)

    done = wait_done(client, first)
    assert done["status"] == "done" and done["verdict"] == "non_factual"
    assert done["report"]["claims"][0]["label"] == "non_factual"
    assert [e["kind"] for e in done["events"]] == ["submitted", "claimed", "finished"]
    assert done["report"]["meta"]["model"] == "fake-model" and done["report"]["meta"]["prompts"]
    assert "api_key" not in json.dumps(done["report"]["meta"]["config"]["model"])
    assert wait_done(client, second)["verdict"] == "factual"

    stored = client.get(f"/v1/audits/{first}/report")
    assert stored.status_code == 200 and stored.text == desk.store.report_json(first)

    assert client.get("/v1/audits", params={"verdict": "non_factual"}).json()["total"] == 1
    assert client.get("/v1/audits", params={"q": WRONG.lower()}).json()["items"][0]["id"] == first
    assert client.get("/v1/audits", params={"task": "summarization"}).json()["total"] == 0
    assert client.get("/v1/audits", params={"reviewed": "false"}).json()["total"] == 2
    assert client.get("/v1/audits", params={"since": "2999-01-01T00:00:00"}).json()["total"] == 0
    paged = client.get("/v1/audits", params={"per_page": 1, "page": 2}).json()
    assert paged["total"] == 2 and [i["id"] for i in paged["items"]] == [first]
    assert client.get("/v1/audits/999").status_code == 404
    assert client.get("/v1/health").json()["schema"] == "0008"


def test_reviews_queue_stats_and_exports(desk: ThreadedDesk, tmp_path: Path) -> None:
    client = desk.client()
    wrong, right = submit(client, WRONG_ANSWER), submit(client, RIGHT)
    wait_done(client, wrong), wait_done(client, right)

    queue = client.get("/v1/review-queue", params={"sample": 1}).json()
    assert [(q["audit_id"], q["reason"]) for q in queue] == [(wrong, "needs-review"), (right, "spot-check")]
    assert client.get("/v1/review-queue", params={"sample": 0}).json() == queue[:1]

    url = f"/v1/audits/{wrong}/claims/c0/reviews"
    # A label that conflicts with the stored one is 409; an overturn without a label does not fit the schema: 422.
    assert client.post(url, json={"decision": "confirm", "label": "factual"}).status_code == 409
    assert client.post(url, json={"decision": "overturn"}).status_code == 422
    assert client.post(f"/v1/audits/{wrong}/claims/c9/reviews", json={"decision": "confirm"}).status_code == 404
    assert client.post(url, json={"decision": "maybe"}).status_code == 422
    confirmed = client.post(url, json={"decision": "confirm", "note": "Paris, not Lyon"})
    assert confirmed.status_code == 201 and confirmed.json()["label"] == "non_factual"
    overturned = client.post(
        f"/v1/audits/{right}/claims/c0/reviews",
        json={"decision": "overturn", "label": "non_factual", "note": "disputed"},
    )
    assert overturned.json()["engine_label"] == "factual" and overturned.json()["reviewer"] == "local"

    stats = client.get("/v1/stats").json()
    assert stats["reviews"] == 2 and stats["agreement"] == 0.5
    assert stats["kappa"] == pytest.approx(0.0)
    # counted as they stand: the overturn made `right` non-factual (the engine's verdict stays in the report)
    assert stats["by_verdict"] == {"non_factual": 2} and stats["llm_calls"] == 14
    listed = {a["id"]: a for a in client.get("/v1/audits").json()["items"]}
    assert (listed[right]["verdict"], listed[right]["reviewed_verdict"]) == ("factual", "non_factual")
    assert listed[wrong]["reviewed_verdict"] is None  # confirmed: the engine's verdict stands
    assert client.get("/v1/audits", params={"verdict": "factual"}).json()["total"] == 0
    page = client.get("/").text
    assert "after review; engine said factual" in page and page.count('class="badge badge-non_factual"') == 2
    dashboard = client.get("/dashboard").text
    assert "By verdict, as reviewed" in dashboard
    assert len(stats["over_time"]) == 1 and stats["over_time"][0]["reviews"] == 2
    assert client.get("/v1/review-queue", params={"sample": 1}).json() == []
    assert client.get("/v1/audits", params={"reviewed": "true"}).json()["total"] == 2
    # The report is what the engine said, whatever the reviewers said since.
    assert client.get(f"/v1/audits/{right}").json()["report"]["claims"][0]["label"] == "factual"

    exported = client.get("/v1/audits/export", params={"format": "jsonl"}).text
    lines = [json.loads(x) for x in exported.splitlines()]
    assert [x["audit_id"] for x in lines] == [wrong, right] and lines[0]["reviews"][0]["decision"] == "confirm"
    # the reviewers' verdicts are labels for `debate dynamics fit EXPORT`: confirmed and overturned alike
    (tmp_path / "export.jsonl").write_text(exported, encoding="utf-8")
    fitted = read_log(tmp_path / "export.jsonl")
    assert {k: v[0] for k, v in fitted.finals.items()} == {f"audit-{wrong}/c0": False, f"audit-{right}/c0": False}
    assert {o.label for o in fitted.observations} == {False} and fitted.model == "fake-model"
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/audits/export", params={"format": "csv"}).text)))
    assert [
        (r["audit_id"], r["engine_label"], r["review_decision"], r["review_label"], r["reviewed_verdict"]) for r in rows
    ] == [
        (str(wrong), "non_factual", "confirm", "non_factual", ""),
        (str(right), "factual", "overturn", "non_factual", "non_factual"),
    ]
    ref = client.get("/v1/audits/export", params={"format": "refchecker"}).json()
    # RefChecker's default aggregator, soft: the share of each label.
    assert [(r["Y"]["Contradiction"], r["Y"]["Entailment"], r["ys"]) for r in ref] == [
        (1.0, 0.0, ["Contradiction"]),
        (0.0, 1.0, ["Entailment"]),
    ]
    assert client.get("/v1/audits/export", params={"format": "xml"}).status_code == 422
    # per week through the real store and route: the two reviews moved to either side of a year's end, one in
    # ISO week 2026-W53 and one in 2027-W01 (a calendar-year key would put 2027-01-01 in 2027)
    moved = [datetime(2026, 12, 31, 23, 0), datetime(2027, 1, 4, 9, 0)]
    with desk.store.engine.begin() as conn:
        ids = [row[0] for row in conn.execute(text("SELECT id FROM reviews ORDER BY id"))]
        for review_id, at in zip(ids, moved, strict=True):
            conn.execute(text("UPDATE reviews SET created_at = :at WHERE id = :id"), {"at": at, "id": review_id})
    reviews = [(moved[0], "non_factual", "non_factual", wrong, "c0"), (moved[1], "factual", "non_factual", right, "c0")]
    periods = {}
    for bucket in ("week", "day"):
        got = client.get("/v1/stats", params={"bucket": bucket}).json()
        check_stats(reviews, bucket, got)
        periods[bucket] = [p["period"] for p in got["over_time"]]
    assert periods == {"week": ["2026-W53", "2027-W01"], "day": ["2026-12-31", "2027-01-04"]}
    assert client.get("/v1/stats", params={"bucket": "month"}).status_code == 422


def test_the_csv_export_never_starts_a_formula(desk: ThreadedDesk) -> None:
    """OWASP's CSV injection: a submitted claim or a reviewer's note that starts with = + - @ (or a tab or carriage
    return) is exported with a leading single quote, so a spreadsheet shows it as text instead of running it."""
    client = desk.client()
    formula = '=HYPERLINK("http://evil.example","click")'
    given = {
        **FRANCE,
        "response": "The capital of France is Paris.",
        "claims": [[formula, "is", "a link"], ["+1", "plus", "-2"]],
    }
    audit = submit(client, given)
    wait_done(client, audit)
    for claim, note in (("c0", "@SUM(A1:A9)"), ("c1", "-1+1")):
        decision = {"decision": "overturn", "label": "factual", "note": note}
        response = client.post(f"/v1/audits/{audit}/claims/{claim}/reviews", json=decision)
        if response.status_code == 409:  # the engine already said factual
            response = client.post(
                f"/v1/audits/{audit}/claims/{claim}/reviews", json={"decision": "confirm", "note": note}
            )
        assert response.status_code == 201, response.text
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/audits/export", params={"format": "csv"}).text)))
    cells = [value for row in rows for value in row.values()]
    assert not [c for c in cells if c and c[0] in "=+-@\t\r"], cells
    assert rows[0]["claim"].startswith("'=HYPERLINK(") and rows[1]["claim"].startswith("'+1")
    assert [r["review_note"] for r in rows] == ["'@SUM(A1:A9)", "'-1+1"]


def test_batches_upload_progress_and_bad_lines(desk: ThreadedDesk) -> None:
    client = desk.client()
    body = jsonl([{"id": "a", **RIGHT}, {"id": "b", **WRONG_ANSWER}]) + b'{"id": "c", "response": ""}\nnot json\n'
    created = client.post(
        "/v1/batches",
        params={"task": "qa", "name": "nightly"},
        content=body,
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert created.status_code == 202, created.text
    batch = created.json()
    assert batch["total"] == 2 and [e["line"] for e in batch["input_errors"]] == [3, 4]
    assert "field 'response'" in batch["input_errors"][0]["message"]
    assert "not valid JSON" in batch["input_errors"][1]["message"]
    progress = wait_for(lambda: (b := client.get(f"/v1/batches/{batch['id']}").json())["done"] and b, what="batch")
    assert progress["counts"] == {"done": 2}
    listed = client.get("/v1/audits", params={"batch": batch["id"]}).json()
    assert sorted(i["verdict"] for i in listed["items"]) == ["factual", "non_factual"]

    # A multipart upload is what a cross-site form could send: without a key it needs the page's CSRF token.
    multipart = client.post("/v1/batches", files={"file": ("ref.json", json.dumps(REFCHECKER_EXAMPLE))})
    assert multipart.status_code == 403 and "CSRF" in multipart.json()["detail"]
    refchecker = client.post(
        "/v1/batches",
        params={"name": "ref.json"},
        content=json.dumps(REFCHECKER_EXAMPLE),
        headers={"Content-Type": "application/json"},
    )
    assert refchecker.status_code == 202 and refchecker.json()["total"] == 2 and refchecker.json()["name"] == "ref.json"
    assert client.get("/v1/batches").json()[0]["id"] == refchecker.json()["id"]

    empty = client.post("/v1/batches", content=b"not json\n", headers={"Content-Type": "application/x-ndjson"})
    assert empty.status_code == 422 and "line 1" in empty.json()["detail"]
    bad_task = client.post(
        "/v1/batches",
        params={"task": "poetry"},
        content=jsonl([RIGHT | {"id": "x"}]),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert bad_task.status_code == 422 and "poetry" in bad_task.json()["detail"]
    assert client.get("/v1/batches/999").status_code == 404


def test_bad_input_gets_a_clear_4xx(desk: ThreadedDesk) -> None:
    client = desk.client()
    cases = [
        ({**RIGHT, "task": "poetry"}, "unknown task 'poetry'"),
        ({**RIGHT, "response": "  "}, "must not be blank"),
        ({**RIGHT, "overrides": {"chain": "sideways"}}, "unknown chain 'sideways'"),
        ({**RIGHT, "overrides": {"min_rounds": 5, "max_rounds": 2}}, "min_rounds (5) must not exceed max_rounds"),
        ({**RIGHT, "colour": "blue"}, "Extra inputs are not permitted"),
    ]
    for body, message in cases:
        response = client.post("/v1/audits", json=body)
        assert response.status_code == 422, body
        assert message in json.dumps(response.json()), response.json()
    assert client.post("/v1/audits", content=b"{", headers={"Content-Type": "application/json"}).status_code == 400
    assert client.get("/v1/audits", params={"verdict": "maybe"}).status_code == 422
    assert client.get("/v1/audits", params={"per_page": 1000}).status_code == 422


def test_overrides_apply_to_one_audit(desk: ThreadedDesk) -> None:
    client = desk.client()
    audit = wait_done(client, submit(client, {**RIGHT, "overrides": {"min_rounds": 1, "chain": "always-trust"}}))
    config = audit["report"]["meta"]["config"]["debate"]
    assert (config["min_rounds"], config["chain"]) == (1, "always-trust")
    assert [s["name"] for s in audit["report"]["claims"][0]["debate"]["states"]] == ["S0", "S1"]
    plain = wait_done(client, submit(client, RIGHT))
    assert [s["name"] for s in plain["report"]["claims"][0]["debate"]["states"]] == ["S0", "S2", "S2"]


def test_body_and_batch_limits(tmp_path: Path, model: FakeOpenAI) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, max_body_bytes=4096, max_batch_items=2)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        big = client.post("/v1/audits", json={**RIGHT, "response": "x" * 5000})
        assert big.status_code == 413 and "4096" in big.json()["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while streaming too
            yield b'{"response": "' + b"y" * 3000
            yield b"z" * 3000 + b'"}'

        streamed = client.post("/v1/audits", content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413
        three = jsonl([{"id": str(i), **RIGHT} for i in range(3)])
        too_many = client.post("/v1/batches", content=three, headers={"Content-Type": "application/x-ndjson"})
        assert too_many.status_code == 413 and "limit is 2" in too_many.json()["detail"]


def test_cancel_stops_pending_and_running_work(tmp_path: Path) -> None:
    slow = FakeOpenAI(
        responder=lambda body: Reply(
            content=json.dumps({"opinion": "ok", "factuality": True, "Error severity": 0}), delay_s=0.5
        )
    )
    with slow, ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/d.sqlite", slow.base_url, jobs=1)) as desk:
        client = desk.client()
        running, pending = submit(client, RIGHT), submit(client, RIGHT | {"question": "Other?"})
        wait_for(lambda: client.get(f"/v1/audits/{running}").json()["status"] == "running", what="running")
        assert client.post(f"/v1/audits/{pending}/cancel").json()["status"] == "cancelled"
        assert client.post(f"/v1/audits/{running}/cancel").json()["status"] == "cancelled"
        assert client.post("/v1/audits/999/cancel").status_code == 404
        # The worker notices at its next lease renewal and stops; nothing is stored for either audit.
        wait_for(lambda: "discarded" in _kinds(client, running) or _lease_lost(desk, running), 15, "the worker")
        for audit_id in (running, pending):
            audit = client.get(f"/v1/audits/{audit_id}").json()
            assert audit["status"] == "cancelled" and audit["report"] is None
            assert "finished" not in _kinds(client, audit_id)
            assert 'class="badge badge-status-cancelled">cancelled<' in client.get(f"/audits/{audit_id}").text
        page = client.get("/").text  # a cancelled audit says so; it has no verdict, pending or other
        assert page.count('class="badge badge-status-cancelled">cancelled<') == 2 and "badge-none" not in page


def _kinds(client: httpx.Client, audit_id: int) -> list[str]:
    return [e["kind"] for e in client.get(f"/v1/audits/{audit_id}").json()["events"]]


def _lease_lost(desk: ThreadedDesk, audit_id: int) -> bool:
    worker = desk.app.state.worker
    return worker.started.is_set() and audit_id not in worker.running


def test_keys_roles_and_attribution(tmp_path: Path, model: FakeOpenAI) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, keys=api_keys())
    with ThreadedDesk(settings) as desk:
        anonymous = desk.client()
        for method, url in [
            ("GET", "/v1/audits"),
            ("GET", "/v1/stats"),
            ("GET", "/v1/review-queue"),
            ("POST", "/v1/audits"),
            ("GET", "/v1/audits/export"),
            ("GET", "/v1/batches"),
        ]:
            response = anonymous.request(method, url, json=RIGHT if method == "POST" else None)
            assert response.status_code == 401, url
            assert response.headers["WWW-Authenticate"] == "Bearer"
        assert httpx.get(desk.url + "/v1/audits", headers={"Authorization": "Bearer wrong"}).status_code == 401
        page = httpx.get(desk.url + "/", headers={"Accept": "text/html"}, follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/login")

        sam, alice, root = desk.client("sam"), desk.client("alice"), desk.client("root")
        assert alice.post("/v1/audits", json=RIGHT).status_code == 403
        audit_id = submit(sam, WRONG_ANSWER)
        wait_done(sam, audit_id)
        review = {"decision": "confirm"}
        forbidden = sam.post(f"/v1/audits/{audit_id}/claims/c0/reviews", json=review)
        assert forbidden.status_code == 403 and "submitter" in forbidden.json()["detail"]
        assert sam.get("/v1/review-queue").status_code == 403
        assert sam.get("/v1/audits/export").status_code == 403
        assert alice.post(f"/v1/audits/{audit_id}/cancel").status_code == 403
        assert alice.post(f"/v1/audits/{audit_id}/claims/c0/reviews", json=review).status_code == 201
        assert root.get("/v1/audits/export").status_code == 200
        upload = sam.post(
            "/v1/batches", files={"file": ("b.jsonl", jsonl([{"id": "1", **RIGHT}]))}, data={"task": "qa"}
        )
        assert upload.status_code == 202 and upload.json()["name"] == "b.jsonl"
        # Two file parts: refused, naming the rule (the second was once used silently).
        two = [
            ("file", ("a.jsonl", jsonl([{"id": "a", **RIGHT}]))),
            ("file", ("b.jsonl", jsonl([{"id": "b", **RIGHT}]))),
        ]
        doubled = sam.post("/v1/batches", files=two, data={"task": "qa"})
        assert doubled.status_code == 422 and doubled.json()["detail"].startswith("file: one file part"), doubled.text
        assert len(root.get("/v1/batches").json()) == 1
        audit = root.get(f"/v1/audits/{audit_id}").json()
        assert audit["submitted_by"] == "sam" and audit["reviews"][0]["reviewer"] == "alice"
        assert api_keys()[0].sha256 not in json.dumps(audit)
        # A key in X-API-Key works too.
        assert httpx.get(desk.url + "/v1/stats", headers={"X-API-Key": "root-secret-key"}).status_code == 200
    store_bytes = b"".join(p.read_bytes() for p in tmp_path.glob("d.sqlite*"))
    for secret in ("sk-endpoint-secret-0123", "alice-secret-key", "sam-secret-key", "root-secret-key"):
        assert secret.encode() not in store_bytes, secret


def test_ui_session_login_and_csrf(tmp_path: Path, model: FakeOpenAI) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, keys=api_keys())
    with ThreadedDesk(settings) as desk, httpx.Client(base_url=desk.url) as browser:
        assert browser.post("/login", data={"key": "nope", "next": "/"}).status_code == 401
        login = browser.post("/login", data={"key": "root-secret-key", "next": "//evil.example/"})
        assert login.status_code == 303 and login.headers["location"] == "/"
        assert "root-secret-key" not in login.headers["set-cookie"]
        page = browser.get("/submit")
        assert page.status_code == 200 and "Signed in as" in page.text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        form = {"task": "qa", "question": "Q?", "response": "An answer.", "reference": "Ref."}
        assert browser.post("/submit", data=form).status_code == 403
        assert browser.post("/submit", data=form | {"csrf_token": "forged"}).status_code == 403
        evil = browser.post("/submit", data=form | {"csrf_token": token}, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403
        made = browser.post("/submit", data=form | {"csrf_token": token})
        assert made.status_code == 303 and made.headers["location"].startswith("/audits/")
        # The session cookie is ambient: a JSON request that relies on it needs the token as well.
        assert browser.post("/v1/audits", json=RIGHT).status_code == 403
        assert browser.post("/v1/audits", json=RIGHT, headers={"X-CSRF-Token": token}).status_code == 202
        logout = browser.post("/logout", data={"csrf_token": token})
        assert logout.status_code == 303


@pytest.mark.parametrize("secret", ["kept-across-restarts", None])
def test_a_session_outlives_a_restart_with_the_deployment_s_secret(
    tmp_path: Path, model: FakeOpenAI, secret: str | None
) -> None:
    """With --session-secret-file (the docs' unit sets it) a restart signs no one out; without one, each start
    makes its own secret and the old session is refused (issue 73: the unit did not set it)."""
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, keys=api_keys(), jobs=0)
    settings = settings.model_copy(update={"session_secret": secret})
    with ThreadedDesk(settings) as first, httpx.Client(base_url=first.url) as browser:
        assert browser.post("/login", data={"key": "root-secret-key", "next": "/"}).status_code == 303
        cookies = dict(browser.cookies)
    with ThreadedDesk(settings) as second, httpx.Client(base_url=second.url, cookies=cookies) as browser:
        page = browser.get("/submit")
    signed_in = page.status_code == 200 and "Signed in as" in page.text
    assert signed_in is (secret is not None), (page.status_code, page.headers.get("location"))


def test_open_desk_still_needs_csrf_for_forms(desk: ThreadedDesk) -> None:
    with httpx.Client(base_url=desk.url) as browser:
        form = {"task": "qa", "response": "An answer."}
        assert browser.post("/submit", data=form).status_code == 403
        page = browser.get("/submit")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        assert browser.post("/submit", data=form | {"csrf_token": token}).status_code == 303
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        # A cross-site form post cannot ride on the page's token without the cookie.
        stranger = httpx.post(desk.url + "/submit", data=form | {"csrf_token": token})
        assert stranger.status_code == 403


def test_everything_is_escaped(desk: ThreadedDesk) -> None:
    client = desk.client()
    attack = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    audit_id = submit(client, {"question": attack, "response": f"Paris. {attack}", "reference": attack})
    wait_done(client, audit_id)
    html = client.get(f"/audits/{audit_id}").text
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    listing = client.get("/", params={"q": "<script>"}).text
    assert "<script>alert" not in listing and "&lt;script&gt;" in listing


def test_ui_pages_render(desk: ThreadedDesk) -> None:
    client = desk.client()
    audit_id = submit(client, WRONG_ANSWER)
    wait_done(client, audit_id)
    client.post(f"/v1/audits/{audit_id}/claims/c0/reviews", json={"decision": "confirm"})
    for path, expected in [
        ("/", "Audits"),
        (f"/audits/{audit_id}", "Debate chain"),
        ("/queue", "Review queue"),
        ("/dashboard", "Agreement over time"),
        ("/submit", "Upload a batch"),
        ("/docs", "swagger"),
        ("/openapi.json", "/v1/review-queue"),
    ]:
        response = client.get(path)
        assert response.status_code == 200 and expected in response.text, path
    assert '<img src="/dashboard/agreement.png"' in client.get("/dashboard").text
    plot = client.get("/dashboard/agreement.png")
    assert plot.headers["content-type"] == "image/png" and plot.content.startswith(b"\x89PNG")
    assert client.get("/audits/999").status_code == 404


@pytest.mark.slow  # runs the `debate` command
def test_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = debate(
        "serve",
        "--host",
        "0.0.0.0",
        "--db",
        f"sqlite:///{tmp_path}/d.sqlite",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
    )
    assert result.returncode == 2 and "API keys" in result.stderr


@pytest.mark.slow  # runs the `debate` command
def test_new_key_line_is_accepted_by_the_keys_file(tmp_path: Path) -> None:
    from markov_debate.desk.auth import find_key, load_keys

    result = debate("new-key", "carol", "reviewer")
    assert result.returncode == 0, result.stderr
    # standard output is the keys-file line alone (`>> keys.txt` as the docs and --help say); the key on stderr
    [line] = result.stdout.splitlines()
    key = result.stderr.rsplit(": ", 1)[1].strip()
    assert key not in line and line.startswith("carol:reviewer:sha256:")
    path = tmp_path / "keys"
    path.write_text(f"# reviewers\n{line}\n")
    keys = load_keys(path, env="dave:admin:plain-key")
    assert find_key(keys, key).name == "carol"  # type: ignore[union-attr]
    assert find_key(keys, "plain-key").role == "admin"  # type: ignore[union-attr]
    path.write_text("eve:boss:k\n")
    with pytest.raises(Exception, match="keys:1: role 'boss'"):
        load_keys(path, env="")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_store_is_refused_in_one_line(url: str) -> None:
    with pytest.raises(StoreError, match=r"an in-memory SQLite store .* cannot be shared: give a file"):
        Store(url)


def test_store_migrates_and_reopens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.sqlite"
    first = Store(url)
    assert first.schema_revision() == "0008"
    first.close()
    again = Store(url)  # an up-to-date store is left as it is
    assert again.schema_revision() == "0008"
    again.close()


def test_the_migration_gives_audits_reviewed_before_it_their_verdict_as_reviewed(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    import markov_debate.desk.store.db as db

    url = f"sqlite:///{tmp_path}/old.sqlite"
    with ThreadedDesk(settings_for(url, model.base_url)) as desk:
        client = desk.client()
        audit = submit(client, RIGHT)
        wait_done(client, audit)
        overturn = {"decision": "overturn", "label": "non_factual"}
        assert client.post(f"/v1/audits/{audit}/claims/c0/reviews", json=overturn).status_code == 201
    config = Config()
    config.set_main_option("script_location", str(db._MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as conn:  # the store as revision 0002 left it: no reviewed verdict anywhere
        config.attributes["connection"] = conn
        command.downgrade(config, "0002")
    engine.dispose()
    store = Store(url)
    try:
        assert store.schema_revision() == "0008"
        assert store.audit(audit).reviewed_verdict == "non_factual"
    finally:
        store.close()


def test_pages_show_the_reference_pending_or_not_one_cost_wording_and_a_batch_task(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    # no worker (jobs 0): the audits stay pending, as behind a busy queue
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, jobs=0)
    with ThreadedDesk(settings) as desk, httpx.Client(base_url=desk.url) as browser:
        pending = submit(desk.client(), WRONG_ANSWER)
        page = browser.get(f"/audits/{pending}").text
        assert "<h2>Reference</h2>" in page and "Paris is the capital of France." in page
        sources = submit(desk.client(), {"task": "rag", "response": "Paris [1].", "reference": {"1": "Paris, France."}})
        assert '<span class="source">[1]</span> Paris, France.' in browser.get(f"/audits/{sources}").text
        bare = submit(desk.client(), {"response": "Paris."})
        assert "None given: claims are judged without a reference" in browser.get(f"/audits/{bare}").text
        # the batch form names no task unless the user picks one, and the server refuses a form without one
        form_page = browser.get("/submit").text
        assert re.search(
            r'<select id="batch-task" name="task" required><option value="" disabled\s+selected>', form_page
        )
        token = re.search(r'name="csrf_token" value="([^"]+)"', form_page).group(1)  # type: ignore[union-attr]
        upload = {"file": ("b.jsonl", jsonl([{"id": "1", **RIGHT}]))}
        refused = browser.post("/batches", files=upload, data={"csrf_token": token, "name": "nightly"})
        assert refused.status_code == 422 and "task: choose the task of the batch&#39;s lines" in refused.text
        made = browser.post("/batches", files=upload, data={"csrf_token": token, "task": "dialogue"})
        assert made.status_code == 303
        batch_page = browser.get(made.headers["location"]).text
        assert '<strong id="batch-task">dialogue</strong>' in batch_page
        assert "cost not tracked" in browser.get("/dashboard").text
        assert browser.get("/favicon.ico").headers["content-type"] == "image/x-icon"
    priced = settings_for(f"sqlite:///{tmp_path}/p.sqlite", model.base_url, price_prompt_per_mtok=2.0)
    with ThreadedDesk(priced) as desk, httpx.Client(base_url=desk.url) as browser:
        done = wait_done(desk.client(), submit(desk.client(), RIGHT))
        assert done["status"] == "done"
        assert re.search(r"cost \$0\.\d{4}", browser.get(f"/audits/{done['id']}").text)
        assert re.search(r"cost \$0\.\d{4}", browser.get("/dashboard").text)
