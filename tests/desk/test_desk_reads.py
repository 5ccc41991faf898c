"""Reads that must not grow with the store or show more than the reader's own (issue 44), over real HTTP: the
audit list pages by id (keyset) at any depth, a submitter's statistics and dashboard count its own audits, and the
agreement chart is drawn once per change, not once per request. The list filters by what the guard did (issue 47)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from markov_debate.desk import views
from tests.support.desk import ThreadedDesk, api_keys, guard_record, settings_for, wait_done
from tests.support.fakes import FakeOpenAI

AUDIT = {"question": "Capital of France?", "response": "Paris.", "reference": "Paris is the capital of France."}


@pytest.fixture
def desk(tmp_path: Path, model: FakeOpenAI) -> Iterator[ThreadedDesk]:
    with ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/r.sqlite", model.base_url, keys=api_keys())) as server:
        yield server


def test_the_list_pages_by_id_to_the_end_with_nothing_missed_or_repeated(desk: ThreadedDesk) -> None:
    root = desk.client("root")
    made = [root.post("/v1/audits", json=AUDIT).json()["id"] for _ in range(7)]
    seen, before = [], None
    while True:
        page = root.get("/v1/audits", params={"per_page": 3, **({"before": before} if before else {})}).json()
        seen += [item["id"] for item in page["items"]]
        before = page["next_before"]
        if before is None:
            break
        assert before == page["items"][-1]["id"]
    assert seen == sorted(made, reverse=True) and page["total"] == 7
    html = root.get("/", params={"before": made[3]}, headers={"Accept": "text/html"}).text
    assert f"/audits/{made[2]}" in html and f"/audits/{made[3]}" not in html and ">Newest</a>" in html


def test_a_submitters_statistics_count_its_own_audits(desk: ThreadedDesk) -> None:
    sam, root, alice = desk.client("sam"), desk.client("root"), desk.client("alice")
    mine = sam.post("/v1/audits", json=AUDIT).json()["id"]
    for _ in range(3):
        root.post("/v1/audits", json={**AUDIT, "response": "Lyon."})
    wait_done(sam, mine)
    theirs = [a["id"] for a in root.get("/v1/audits").json()["items"] if a["id"] != mine]
    for audit_id in theirs:
        wait_done(root, audit_id)
    review = {"decision": "overturn", "label": "factual", "note": "checked"}
    assert alice.post(f"/v1/audits/{theirs[0]}/claims/c0/reviews", json=review).status_code == 201
    own = sam.get("/v1/stats").json()
    assert sum(own["by_status"].values()) == 1 and own["reviews"] == 0 and own["by_verdict"] == {"factual": 1}
    everyone = alice.get("/v1/stats").json()
    assert sum(everyone["by_status"].values()) == 4 and everyone["reviews"] == 1
    page = sam.get("/dashboard", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "non_factual" not in page.text


def test_the_agreement_chart_is_drawn_once_per_change(desk: ThreadedDesk) -> None:
    root, alice = desk.client("root"), desk.client("alice")
    audit_id = root.post("/v1/audits", json={**AUDIT, "response": "Lyon."}).json()["id"]
    wait_done(root, audit_id)
    alice.post(f"/v1/audits/{audit_id}/claims/c0/reviews", json={"decision": "confirm"})
    views._drawn.cache_clear()
    first = alice.get("/dashboard/agreement.png")
    again = alice.get("/dashboard/agreement.png")
    assert first.content == again.content and first.content.startswith(b"\x89PNG")
    assert views._drawn.cache_info().misses == 1 and views._drawn.cache_info().hits == 1
    alice.post(f"/v1/audits/{audit_id}/claims/c0/reviews", json={"decision": "overturn", "label": "factual"})
    alice.get("/dashboard/agreement.png")
    assert views._drawn.cache_info().misses == 2  # a new review: a new chart


def test_the_list_filters_by_what_the_guard_did_in_the_api_and_the_page(desk: ThreadedDesk) -> None:
    actions = ["blocked", "flagged", "blocked", "passed-unverified"]
    assert desk.store.record_guarded([guard_record(n, a, policy="block") for n, a in enumerate(actions)]) == 4
    ids = {n: desk.store.guard_decision(f"guard-{n}")[0] for n in range(4)}
    root = desk.client("root")
    plain = root.post("/v1/audits", json=AUDIT).json()["id"]
    everything = root.get("/v1/audits").json()
    assert everything["total"] == 5
    for action in ("blocked", "flagged", "passed-unverified"):
        page = root.get("/v1/audits", params={"guard_action": action}).json()
        wanted = sorted((ids[n] for n, a in enumerate(actions) if a == action), reverse=True)
        assert [item["id"] for item in page["items"]] == wanted and page["total"] == len(wanted)
    assert root.get("/v1/audits", params={"guard_action": "annotated"}).json()["total"] == 0
    wrong = root.get("/v1/audits", params={"guard_action": "deleted"})
    assert wrong.status_code == 422 and "guard_action" in wrong.text
    html = root.get("/", params={"guard": "blocked"}, headers={"Accept": "text/html"}).text
    assert f"/audits/{ids[0]}" in html and f"/audits/{ids[2]}" in html
    assert f"/audits/{ids[1]}" not in html and f"/audits/{plain}" not in html
    assert '<option value="blocked" selected>' in html and "2 audit(s)" in html
