"""The review queue as an indexed read (on SQLite and a real PostgreSQL) and review conflicts: a review made on a
stale view is refused with the current label, over the API and in the UI."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from debate.calibration import Labels
from debate.config import DebateConfig
from markov_debate.desk.store import Store
from markov_debate.desk.store.queueing import claim_draw, sample_window
from tests.support.calibration import calibration, save_calibration
from tests.support.desk import WRONG, ThreadedDesk, api_keys, fresh_database, settings_for, wait_done
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op

FRANCE = {"question": "What is the capital of France?", "reference": "Paris is the capital of France."}
TWO_WRONG = {**FRANCE, "response": "x", "claims": [f"The capital of France is {WRONG}.", f"{WRONG} is in France."]}
RIGHT = {**FRANCE, "response": "The capital of France is Paris."}


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/q.sqlite"
    return fresh_database(request.getfixturevalue("postgres"))


def _submit(client: httpx.Client, body: dict[str, Any]) -> int:
    response = client.post("/v1/audits", json=body)
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def _downgraded(url: str, revision: str) -> set[str]:
    """Downgrade a SQLite store to `revision` (the next Store upgrades it again); the claims table's columns then."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    import markov_debate.desk.store.db as db

    config = Config()
    config.set_main_option("script_location", str(db._MIGRATIONS))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
            return {c[1] for c in conn.execute(text("PRAGMA table_info(claims)"))}
    finally:
        engine.dispose()


def test_a_seeds_sample_is_a_fixed_share_of_fixed_draws() -> None:
    draws = [claim_draw(audit, f"c{k}") for audit in range(400) for k in range(25)]
    assert len(set(draws)) == len(draws) and all(0 <= d < 1 for d in draws)
    for seed in range(20):
        windows = sample_window(seed, 0.1)
        assert abs(sum(hi - lo for lo, hi in windows) - 0.1) < 1e-12
        share = sum(any(lo <= d < hi for lo, hi in windows) for d in draws) / len(draws)
        assert 0.08 < share < 0.12, (seed, share)
    assert sample_window(3, 0) == [] and sample_window(3, 1) == [(0.0, 1.0)]
    wrapped = next(w for seed in range(200) if len(w := sample_window(seed, 0.5)) == 2)
    assert wrapped[0][1] == 1.0 and wrapped[1][0] == 0.0  # an arc past 1 goes on from 0


def test_the_queue_follows_finishes_and_reviews_and_its_sample_stays_put(db_url: str, model: FakeOpenAI) -> None:
    settings = settings_for(db_url, model.base_url, keys=api_keys(), queue_sample_rate=0.5)
    with ThreadedDesk(settings) as desk:
        sam, alice = desk.client("sam"), desk.client("alice")
        wrong = _submit(sam, TWO_WRONG)
        rights = [_submit(sam, {**RIGHT, "response": f"The capital of France is Paris ({i})."}) for i in range(12)]
        for audit in (wrong, *rights):
            wait_done(sam, audit)
        queue = alice.get("/v1/review-queue", params={"limit": 100}).json()
        assert [(q["audit_id"], q["claim_id"], q["reason"]) for q in queue[:2]] == [
            (wrong, "c0", "needs-review"),
            (wrong, "c1", "needs-review"),
        ]
        assert queue[0]["evidence"][0]["text"] == FRANCE["reference"] and queue[0]["final_opinion"]
        spot = [(q["audit_id"], q["claim_id"]) for q in queue if q["reason"] == "spot-check"]
        assert spot == sorted(spot) and 0 < len(spot) < len(rights)  # half of the factual claims, in audit order
        assert alice.get("/v1/review-queue", params={"limit": 1}).json() == queue[:1]
        # a review takes its claim out of the queue; the next claim leads
        confirm = {"decision": "confirm", "seen_label": "non_factual"}
        assert alice.post(f"/v1/audits/{wrong}/claims/c0/reviews", json=confirm).status_code == 201
        assert alice.get("/v1/review-queue", params={"limit": 1}).json()[0]["claim_id"] == "c1"
        # new audits do not move old claims in or out of the sample
        later = _submit(sam, {**RIGHT, "response": "The capital of France is Paris, later."})
        wait_done(sam, later)
        again = alice.get("/v1/review-queue", params={"limit": 100}).json()
        spot_again = [(q["audit_id"], q["claim_id"]) for q in again if q["reason"] == "spot-check"]
        assert [s for s in spot_again if s[0] != later] == spot
        # another seed is another sample of the same size, all or nothing at the ends
        other = alice.get("/v1/review-queue", params={"limit": 100, "seed": 7}).json()
        assert [q for q in other if q["reason"] == "needs-review"] == again[:1]
        every = alice.get("/v1/review-queue", params={"limit": 100, "sample": 1}).json()
        assert len(every) == 1 + len(rights) + 1
        assert alice.get("/v1/review-queue", params={"limit": 100, "sample": 0}).json() == again[:1]


def test_the_queue_reads_the_queue_index_not_every_claim(tmp_path: Path, model: FakeOpenAI) -> None:
    with ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/q.sqlite", model.base_url)) as desk:
        wait_done(desk.client(), _submit(desk.client(), TWO_WRONG))
        statements: list[tuple[str, Any]] = []

        def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            if statement.lstrip().upper().startswith("SELECT") and "claims" in statement:
                statements.append((statement, parameters))

        engine = desk.store.reader  # the queue is a read
        event.listen(engine, "before_cursor_execute", record)
        try:
            desk.store.review_queue(limit=10, sample_rate=0.1, seed=0)
        finally:
            event.remove(engine, "before_cursor_execute", record)
        assert len(statements) == 2  # needs-review, then the spot-check sample
        with engine.connect() as conn:
            for statement, parameters in statements:
                plan = " | ".join(
                    str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
                )
                assert "ix_claims_queue" in plan and "SCAN claims" not in plan, plan
                assert "TEMP B-TREE" not in plan, plan  # the index gives the order: no sort of all waiting claims


def test_the_queue_migration_fills_the_queue_from_stored_audits(tmp_path: Path, model: FakeOpenAI) -> None:
    url = f"sqlite:///{tmp_path}/old.sqlite"
    with ThreadedDesk(settings_for(url, model.base_url, queue_sample_rate=1.0)) as desk:
        client = desk.client()
        wrong, right = _submit(client, TWO_WRONG), _submit(client, RIGHT)
        wait_done(client, wrong), wait_done(client, right)
        assert client.post(f"/v1/audits/{wrong}/claims/c1/reviews", json={"decision": "confirm"}).status_code == 201
        before = desk.store.review_queue(limit=50, sample_rate=1.0)
    assert "queue" not in _downgraded(url, "0003")
    store = Store(url)
    try:
        assert store.schema_revision() == "0008"
        after = store.review_queue(limit=50, sample_rate=1.0)
        assert after == before and [(q.audit_id, q.claim_id) for q in after] == [(wrong, "c0"), (right, "c0")]
        assert after[0].evidence and after[0].final_opinion
    finally:
        store.close()


def test_a_review_on_a_stale_view_is_refused_with_the_current_label(db_url: str, model: FakeOpenAI) -> None:
    with ThreadedDesk(settings_for(db_url, model.base_url, keys=api_keys())) as desk:
        audit = _submit(desk.client("sam"), TWO_WRONG)
        wait_done(desk.client("sam"), audit)
        alice, root = desk.client("alice"), desk.client("root")
        route = f"/v1/audits/{audit}/claims/c0/reviews"
        overturn = {"decision": "overturn", "label": "factual", "seen_label": "non_factual"}
        assert alice.post(route, json=overturn).status_code == 201
        # root saw the engine's label: alice's overturn changed it since
        stale = root.post(route, json={"decision": "confirm", "seen_label": "non_factual"})
        assert stale.status_code == 409
        body = stale.json()
        assert body["current_label"] == "factual" and body["reviewed_by"] == "alice"
        assert "you saw non factual; it is now factual, by alice's overturn" in body["detail"]
        assert len(root.get(f"/v1/audits/{audit}").json()["reviews"]) == 1  # nothing was stored
        fresh = {"decision": "confirm", "seen_label": "factual"}  # back to the engine's label, knowingly
        assert root.post(route, json=fresh).status_code == 201
        assert root.post(route, json={"decision": "confirm"}).status_code == 201  # no view declared: no check
        # two reviewers on the same view at the same moment: one wins, the other is told
        results: list[int] = []
        same_view = {"decision": "overturn", "label": "not_enough_evidence", "seen_label": "non_factual"}

        def review(client: httpx.Client) -> None:
            results.append(client.post(f"/v1/audits/{audit}/claims/c1/reviews", json=same_view).status_code)

        threads = [threading.Thread(target=review, args=(c,)) for c in (desk.client("alice"), desk.client("root"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [201, 409]


def test_the_ui_says_when_a_review_was_made_on_a_stale_page(tmp_path: Path, model: FakeOpenAI) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/ui.sqlite", model.base_url, keys=api_keys())
    with ThreadedDesk(settings) as desk, httpx.Client(base_url=desk.url, headers={"Accept": "text/html"}) as browser:
        audit = _submit(desk.client("sam"), TWO_WRONG)
        wait_done(desk.client("sam"), audit)
        assert browser.post("/login", data={"key": "alice-secret-key", "next": "/"}).status_code == 303
        page = browser.get(f"/audits/{audit}").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        assert '<input type="hidden" name="seen_label" value="non_factual">' in page
        # a colleague overturns c0 while alice has the page open
        colleague = {"decision": "overturn", "label": "factual", "seen_label": "non_factual"}
        assert desk.client("root").post(f"/v1/audits/{audit}/claims/c0/reviews", json=colleague).status_code == 201
        form = {"csrf_token": token, "decision": "confirm", "seen_label": "non_factual", "note": "looks wrong"}
        refused = browser.post(f"/audits/{audit}/claims/c0/review", data=form)
        assert refused.status_code == 409
        assert "it is now factual, by root&#39;s overturn" in refused.text
        assert f'<a href="/audits/{audit}#claim-c0" id="back">Back to the claim, as it now stands</a>' in refused.text
        reloaded = browser.get(f"/audits/{audit}").text
        assert '<input type="hidden" name="seen_label" value="factual">' in reloaded
        queue = browser.get("/queue").text
        assert '<input type="hidden" name="seen_label" value="non_factual">' in queue  # c1, still unreviewed


def _doubting(call: Call) -> Reply:
    """Every agent says false of Lyon; of Nice the initial agent says true and the others false; Paris is true."""
    asked = call.asked
    if "Paris" in asked and WRONG not in asked and "Nice" not in asked:
        return Reply(content=op(True))
    return Reply(content=op(call.purpose == "debate:initial" and "Nice" in asked, 3))


@contextlib.contextmanager
def _three_audits(db_url: str, cal: str) -> Iterator[tuple[httpx.Client, int, int, int]]:
    """A desk scoring with the calibration at `cal`, after three audits (Nice, Lyon, Paris) finished: the
    reviewer's client and the audits' ids."""
    with FakeOpenAI(routes={"debate": _doubting}) as model:
        settings = settings_for(db_url, model.base_url, keys=api_keys())
        verifier = settings.verifier.model_copy(update={"debate": DebateConfig(calibration=cal)})
        with ThreadedDesk(settings.model_copy(update={"verifier": verifier})) as desk:
            sam, alice = desk.client("sam"), desk.client("alice")
            nice = _submit(sam, {**FRANCE, "response": "x", "claims": ["Nice is the capital of France."]})
            lyon = _submit(sam, {**FRANCE, "response": "x", "claims": [f"{WRONG} is the capital of France."]})
            right = _submit(sam, RIGHT)
            for audit in (nice, lyon, right):
                wait_done(sam, audit)
            yield alice, nice, lyon, right


def test_the_queue_orders_by_p_factual_with_a_calibration_and_keeps_it_across_migrations(
    db_url: str, tmp_path: Path
) -> None:
    cal = save_calibration(tmp_path, calibration(model="fake-model"))
    with _three_audits(db_url, cal) as (alice, nice, lyon, right):
        oldest = alice.get("/v1/review-queue", params={"sample": 1}).json()
        ranked = alice.get("/v1/review-queue", params={"sample": 1, "order": "p_factual"}).json()
        page = alice.get("/queue", params={"order": "p_factual"}, headers={"Accept": "text/html"}).text
    assert [q["audit_id"] for q in oldest] == [nice, lyon, right]
    # needs-review least likely factual first, then the spot-check sample in the same order
    assert [q["audit_id"] for q in ranked] == [lyon, nice, right]
    ps = [q["p_factual"] for q in ranked]
    assert ps[0] < ps[1] < 0.5 < ps[2]
    assert "least likely factual first" in page and f"p_factual {ps[0]:.3f}" in page
    if not db_url.startswith("sqlite"):
        return
    # the probabilities survive a downgrade and upgrade: the migration reads them back from the stored reports
    assert "p_factual" not in _downgraded(db_url, "0005")
    store = Store(db_url)
    try:
        assert store.schema_revision() == "0008"
        again = store.review_queue(limit=50, sample_rate=1.0, order="p_factual")
        assert [q.p_factual for q in again] == pytest.approx(ps)
    finally:
        store.close()


def _asking(tmp_path: Path, *claims: str) -> str:
    """The hand-written calibration asking labels for `claims` (as a fit names them), in that order."""
    asks = [{"claim": claim, "reason": f"asked for {claim}", "gain": 0.1} for claim in claims]
    labels = {"claims": 100, "labelled": 40, "orientation": "labels", "label_next": asks, "p_error": 0.08}
    cal = calibration(model="fake-model").model_copy(update={"labels": Labels.model_validate(labels)})
    return save_calibration(tmp_path, cal)


def test_the_label_next_order_leads_the_queue_with_its_reasons_and_follows_a_new_fit(
    db_url: str, tmp_path: Path
) -> None:
    cal = save_calibration(tmp_path, calibration(model="fake-model"))  # a fit that asks for no label
    with _three_audits(db_url, cal) as (alice, nice, lyon, right):
        refused = alice.get("/v1/review-queue", params={"order": "label-next"})
        assert refused.status_code == 409 and "asks for no label" in refused.json()["detail"]
        # the order names a claim of no audit here and one of a results log: both left out
        _asking(tmp_path, f"audit-{right}/c0", "run-7/c0", f"audit-{nice}/c0", "audit-999/c0")
        queue = alice.get("/v1/review-queue", params={"order": "label-next", "sample": 0}).json()
        assert [(q["audit_id"], q["reason"], q["why"]) for q in queue] == [
            (right, "label-next", f"asked for audit-{right}/c0"),
            (nice, "label-next", f"asked for audit-{nice}/c0"),
            (lyon, "needs-review", None),  # then the rest, oldest first, each claim once
        ]
        page = alice.get("/queue", params={"order": "label-next"}, headers={"Accept": "text/html"}).text
        assert f"Why its label: asked for audit-{right}/c0" in page and "labels worth most first" in page
        # a review takes its claim out of the order
        confirm = {"decision": "confirm", "seen_label": queue[0]["engine_label"]}
        assert alice.post(f"/v1/audits/{right}/claims/c0/reviews", json=confirm).status_code == 201
        after = alice.get("/v1/review-queue", params={"order": "label-next", "sample": 0}).json()
        assert [q["audit_id"] for q in after] == [nice, lyon]
        # a new fit written over the file brings its own order at the next request
        _asking(tmp_path, f"audit-{lyon}/c0")
        newer = alice.get("/v1/review-queue", params={"order": "label-next", "sample": 0, "limit": 1}).json()
        assert [(q["audit_id"], q["reason"]) for q in newer] == [(lyon, "label-next")]
        # a desk without a calibration says what the order needs, on the API and on the page
        (tmp_path / "cal.json").unlink()
        gone = alice.get("/v1/review-queue", params={"order": "label-next"})
        assert gone.status_code == 409 and "cannot be read" in gone.json()["detail"]
        page = alice.get("/queue", params={"order": "label-next"}, headers={"Accept": "text/html"}).text
        assert "Not in the label-next order:" in page and f"audit {lyon}" in page
