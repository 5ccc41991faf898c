"""Inputs off the easy path at the desk's edge (issue 37): a NUL in a URL is a 400 naming where, before any query
reaches PostgreSQL (which cannot store one and would fail as if it were down); blank lines count toward an upload's
line limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.desk import ThreadedDesk, fresh_database, settings_for

pytestmark = pytest.mark.slow  # a PostgreSQL server and the desk on a loopback port


@pytest.mark.parametrize(
    ("method", "url", "where"),
    [
        ("GET", "/v1/audits?q=%00", "query parameter 'q'"),
        ("GET", "/v1/audits?task=qa%00&verdict=factual", "query parameter 'task'"),
        ("POST", "/v1/batches?name=%00", "query parameter 'name'"),
        ("GET", "/?q=Paris%00", "query parameter 'q'"),
        ("POST", "/v1/audits/1/claims/c%00/review", "path"),
    ],
)
def test_a_nul_in_the_url_is_a_400_naming_where_not_a_store_outage(
    postgres: str, method: str, url: str, where: str
) -> None:
    settings = settings_for(fresh_database(postgres), "http://127.0.0.1:9/v1", jobs=0)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        refused = client.request(method, url)
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == f"{where}: holds a NUL character (%00), which is not allowed"
        assert client.get("/v1/health").json()["ok"] is True


def test_blank_lines_count_toward_the_upload_limit(tmp_path: Path) -> None:
    """A body of newlines is refused at the line limit, not read to its end; blank lines below it are skipped."""
    item = {"id": "a", "question": "Where is Paris?", "response": "Paris is in France.", "reference": "France."}
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0, max_batch_items=100)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        ndjson = {"Content-Type": "application/x-ndjson"}
        for junk in (b"\n" * 5_000_000, b" \t \n" * 2_000_000):
            refused = client.post("/v1/batches", params={"task": "qa"}, content=junk, headers=ndjson)
            assert refused.status_code == 413, refused.text
            assert "more than 100 lines (blank ones count)" in refused.json()["detail"]
        body = b"\n" * 10 + json.dumps(item).encode() + b"\n\n"
        accepted = client.post("/v1/batches", params={"task": "qa"}, content=body, headers=ndjson)
        assert accepted.status_code == 202 and accepted.json()["total"] == 1, accepted.text
