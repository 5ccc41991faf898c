"""Each of the desk's routers works on its own: mounted alone on a bare FastAPI app whose state holds only what
the routes' dependencies read (store, settings, guard, the upload processes), with no middleware, no worker and no
UI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from markov_debate.desk.auth import Principal
from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.routes import audits, batches, reviews, stats
from markov_debate.desk.security import Guard
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import NotFoundError, Store
from markov_debate.desk.uploads import UploadPool

RIGHT = {"question": "Capital of France?", "response": "Paris.", "reference": "Paris is the capital of France."}


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[FastAPI]:
    app = FastAPI(docs_url=None, redoc_url=None)  # no routes of its own
    settings = DeskSettings(db_url=f"sqlite:///{tmp_path}/d.sqlite", jobs=0)
    app.state.store = Store(settings.db_url)
    app.state.settings = settings
    app.state.guard = Guard([], None)
    app.state.uploads = UploadPool(settings.db_url, settings, processes=1)  # where batch uploads are ingested
    yield app
    app.state.uploads.close()
    app.state.store.close()


def test_the_audits_router_alone(bare: FastAPI) -> None:
    bare.include_router(audits.router)
    client = TestClient(bare)
    made = client.post("/v1/audits", json=RIGHT)
    assert made.status_code == 202 and made.headers["Location"] == f"/v1/audits/{made.json()['id']}"
    audit_id = made.json()["id"]
    assert client.get(f"/v1/audits/{audit_id}").json()["status"] == "pending"
    pending = client.get(f"/v1/audits/{audit_id}/report")
    assert pending.status_code == 409 and pending.json()["status"] == "pending"
    assert client.get("/v1/audits").json()["total"] == 1
    assert client.post(f"/v1/audits/{audit_id}/cancel").json() == {"id": audit_id, "status": "cancelled"}
    assert client.get("/v1/audits/export", params={"format": "csv"}).text.startswith("audit_id,task,verdict")


def test_the_batches_router_alone(bare: FastAPI) -> None:
    bare.include_router(batches.router)
    client = TestClient(bare)
    lines = b'{"id": "1", "question": "Q?", "response": "A."}\nnot json\n'
    made = client.post(
        "/v1/batches",
        params={"task": "qa", "name": "n"},
        content=lines,
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert made.status_code == 202 and made.json()["total"] == 1
    assert [e["line"] for e in made.json()["input_errors"]] == [2]
    assert client.get(f"/v1/batches/{made.json()['id']}").json()["counts"] == {"pending": 1}
    assert client.post(f"/v1/batches/{made.json()['id']}/retry-failed").json()["requeued"] == 0


def test_the_reviews_and_stats_routers_alone(bare: FastAPI) -> None:
    bare.include_router(reviews.router)
    bare.include_router(stats.router)
    client = TestClient(bare)
    store: Store = bare.state.store
    store.submit(Principal(name="local", role="admin"), AuditRequest(**RIGHT))
    assert client.get("/v1/review-queue").json() == []  # nothing finished yet
    # alone, a route raises the store's typed error; the app's error model turns it into 404 (test_desk_api)
    with pytest.raises(NotFoundError, match="no claim 'c0'"):
        client.post("/v1/audits/1/claims/c0/reviews", json={"decision": "confirm"})
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json()["queue"]["due"] == 1 and "worker" not in health.json()
    assert client.get("/v1/stats").json()["by_status"] == {"pending": 1}


def test_the_ui_router_alone(bare: FastAPI) -> None:
    from fastapi.templating import Jinja2Templates

    from markov_debate.desk.ui import STATIC
    from markov_debate.desk.ui import router as ui_router

    templates = Jinja2Templates(directory=str(STATIC.parent / "templates"))
    templates.env.globals.update(version="test", verdicts=(), tasks=["qa"])
    bare.state.templates = templates
    bare.include_router(ui_router)
    client = TestClient(bare)
    page = client.get("/submit")
    assert page.status_code == 200 and 'id="batch-task"' in page.text
    assert client.get("/docs").text.startswith("<!doctype html>")
    assert client.get("/dashboard").status_code == 200
