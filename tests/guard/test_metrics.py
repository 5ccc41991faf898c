"""/metrics on the desk and the guard, scraped from real servers on 127.0.0.1 and read with the Prometheus text
parser: every figure the docs list is there, with the value the traffic sent makes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.guard.conftest import GOOD, SOURCES
from tests.support.desk import ThreadedDesk, api_keys, settings_for, wait_done
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_desk_s_metrics_count_what_happened(tmp_path: Path) -> None:
    with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}) as model:
        settings = settings_for(f"sqlite:///{tmp_path}/m.sqlite", model.base_url, keys=api_keys())
        with ThreadedDesk(settings) as desk:
            sam, root = desk.client("sam"), desk.client("root")
            audit = sam.post("/v1/audits", json={"question": "Capital?", "response": "Paris is the capital."})
            assert audit.status_code == 202
            wait_done(sam, audit.json()["id"])
            assert httpx.post(desk.url + "/v1/audits", json={"response": "x"}).status_code == 401  # refused unread
            assert httpx.get(desk.url + "/metrics").status_code == 401
            assert sam.get("/metrics").status_code == 403  # an admin's
            scraped = root.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    found = _samples(scraped.text)
    assert found[("desk_audits", (("status", "done"),))] == 1
    assert found[("desk_audits", (("status", "pending"),))] == 0
    posted = (("method", "POST"), ("route", "/v1/audits"), ("status", "202"))
    assert found[("desk_http_requests_total", posted)] == 1
    refused = (("method", "POST"), ("route", "refused"), ("status", "401"))
    assert found[("desk_http_requests_total", refused)] == 1
    assert found[("desk_http_request_duration_seconds_count", (("method", "POST"), ("route", "/v1/audits")))] == 1
    assert found[("desk_store_up", ())] == 1 and found[("desk_model_endpoint_up", ())] == 1


def test_the_guard_s_metrics_count_what_happened(guard_for: Any) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Capital?"}], "sources": SOURCES}
    with (
        FakeOpenAI(responder=lambda request: Reply(content=GOOD)) as upstream,
        FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}) as judge,
    ):
        guard = guard_for(upstream.base_url, judge.base_url)
        for _ in range(2):
            assert httpx.post(guard.base_url + "/chat/completions", json=body, timeout=30).status_code == 200
        assert httpx.get(guard.base_url.removesuffix("/v1") + "/readyz").status_code == 200
        found = _samples(httpx.get(guard.base_url.removesuffix("/v1") + "/metrics").text)
    assert found[("guard_actions_total", (("action", "annotated"),))] == 2
    chat = (("method", "POST"), ("route", "/v1/chat/completions"), ("status", "200"))
    assert found[("guard_http_requests_total", chat)] == 2
    assert found[("guard_http_requests_total", (("method", "GET"), ("route", "/readyz"), ("status", "200")))] == 1
    assert found[("guard_judge_up", ())] == 1 and found[("guard_decisions_dropped_total", ())] == 0
    assert ("guard_decisions_waiting", ()) in found and ("guard_decisions_stored_total", ()) in found
