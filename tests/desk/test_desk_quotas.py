"""What one key may take (issue 44), against `debate serve` on a loopback port: submissions a minute, audits waiting,
a retried upload with its Idempotency-Key (SQLite and PostgreSQL); and sign-in behind the TLS proxy of the deploy
docs, with the headers its example sends."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.support.desk import KEYS, api_keys, auth, fresh_database, jsonl, served

pytestmark = pytest.mark.slow  # starts processes

ROOT = Path(__file__).resolve().parents[2]
ITEM = {"question": "Capital of France?", "response": "Paris.", "reference": "Paris is the capital of France."}


def _lines(n: int, response: str = "Paris.") -> bytes:
    return jsonl([{"id": f"r{i}", **ITEM, "response": response} for i in range(n)])


def _keys_file(folder: Path) -> str:
    path = folder / "keys.txt"
    path.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in api_keys()))
    return str(path)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/quota.sqlite"
    else:
        yield fresh_database(request.getfixturevalue("postgres"))


def test_a_key_past_its_submissions_a_minute_gets_429_and_others_do_not(tmp_path: Path) -> None:
    extra = ("--api-keys-file", _keys_file(tmp_path), "--key-submits-per-minute", "5")
    with served(tmp_path, *extra) as (url, _log):
        sam = httpx.Client(base_url=url, headers=auth("sam"), timeout=30)
        assert [sam.post("/v1/audits", json=ITEM).status_code for _ in range(5)] == [202] * 5
        over = sam.post("/v1/audits", json=ITEM)
        assert over.status_code == 429 and 0 < int(over.headers["Retry-After"]) <= 60, over.text
        assert over.json()["detail"].startswith("sam: more than 5 submissions a minute")
        batch = sam.post("/v1/batches?task=qa", content=_lines(1), headers={"Content-Type": "application/x-ndjson"})
        assert batch.status_code == 429  # uploads spend the same allowance
        root = httpx.Client(base_url=url, headers=auth("root"), timeout=30)
        assert root.post("/v1/audits", json=ITEM).status_code == 202
        assert sam.get("/v1/audits").status_code == 200  # reading is not a submission


def test_audits_waiting_past_a_keys_limit_are_429_whole_batches_included(tmp_path: Path, store_url: str) -> None:
    extra = ("--api-keys-file", _keys_file(tmp_path), "--key-max-pending", "3")
    with served(tmp_path, *extra, db_url=store_url) as (url, _log):
        sam = httpx.Client(base_url=url, headers=auth("sam"), timeout=30)
        ndjson = {"Content-Type": "application/x-ndjson"}
        four = sam.post("/v1/batches?task=qa", content=_lines(4), headers=ndjson)
        assert four.status_code == 429 and four.headers["Retry-After"] == "30"
        assert "sam has 0 audit(s) waiting or running; at most 3, so 4 more do not fit" in four.json()["detail"]
        assert sam.get("/v1/batches").json() == []  # nothing of the refused batch was queued
        assert sam.post("/v1/batches?task=qa", content=_lines(2), headers=ndjson).status_code == 202
        assert sam.post("/v1/audits", json=ITEM).status_code == 202
        over = sam.post("/v1/audits", json=ITEM)
        assert over.status_code == 429 and "room for 0" in over.json()["detail"]
        root = httpx.Client(base_url=url, headers=auth("root"), timeout=30)
        assert root.post("/v1/audits", json=ITEM).status_code == 202  # the limit is each key's own


def test_the_waiting_cap_holds_against_simultaneous_submissions(tmp_path: Path, store_url: str) -> None:
    """Two 1,000-line batches at once under a cap of 1,000 (each parsed in its own upload process), then 20 single
    audits at once under a cap of 1,005: the count and the insert are one step, so exactly one batch and five
    audits get in (2,000 waited when the count was read first and the batch written after)."""
    extra = ("--api-keys-file", _keys_file(tmp_path), "--key-max-pending", "1000", "--key-submits-per-minute", "100")
    ndjson = {**auth("sam"), "Content-Type": "application/x-ndjson"}
    with served(tmp_path, *extra, db_url=store_url) as (url, _log):
        body = _lines(1000)
        with ThreadPoolExecutor(2) as pool:
            batches = list(
                pool.map(
                    lambda _: httpx.post(url + "/v1/batches?task=qa", content=body, headers=ndjson, timeout=120),
                    range(2),
                )
            )
        assert sorted(b.status_code for b in batches) == [202, 429], [b.text[:200] for b in batches]
        stats = httpx.get(url + "/v1/audits", params={"per_page": 1}, headers=auth("sam")).json()
        assert stats["total"] == 1000
    extra = ("--api-keys-file", _keys_file(tmp_path), "--key-max-pending", "1005", "--key-submits-per-minute", "100")
    with served(tmp_path, *extra, db_url=store_url) as (url, _log):
        with ThreadPoolExecutor(20) as pool:
            singles = list(
                pool.map(
                    lambda _: httpx.post(url + "/v1/audits", json=ITEM, headers=auth("sam"), timeout=60), range(20)
                )
            )
        assert sorted(r.status_code for r in singles) == [202] * 5 + [429] * 15, [r.text[:100] for r in singles]


def test_a_retried_upload_with_its_idempotency_key_queues_nothing_twice(tmp_path: Path, store_url: str) -> None:
    with served(tmp_path, "--api-keys-file", _keys_file(tmp_path), db_url=store_url) as (url, _log):
        body, ndjson = _lines(2), {"Content-Type": "application/x-ndjson"}

        def upload(key: str, content: bytes = body) -> httpx.Response:
            with httpx.Client(base_url=url, headers=auth("sam"), timeout=60) as client:
                return client.post("/v1/batches?task=qa", content=content, headers={**ndjson, "Idempotency-Key": key})

        first, again = upload("nightly-1"), upload("nightly-1")
        assert first.status_code == 202 and "Idempotent-Replayed" not in first.headers
        assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
        assert again.json()["id"] == first.json()["id"] and again.headers["Location"] == first.headers["Location"]
        with ThreadPoolExecutor(max_workers=2) as pool:  # two at once: the per-key upload slots
            racing = list(pool.map(upload, ["nightly-2"] * 8))
        assert {r.status_code for r in racing} <= {202, 429}
        assert len({r.json()["id"] for r in racing if r.status_code == 202}) == 1
        other = upload("nightly-1", _lines(2, "Lyon."))
        assert other.status_code == 409 and "was used for a different upload" in other.json()["detail"]
        engine = create_engine(store_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM audits")).scalar() == 4  # two batches of two
            assert conn.execute(text("SELECT count(*) FROM batches")).scalar() == 2
        engine.dispose()


def _nginx_headers(client: str) -> dict[str, str]:
    """The headers the deploy docs' nginx example sets, with nginx's values for a browser at `client` asking for
    https://desk.example.com/."""
    docs = (ROOT / "docs" / "desk.md").read_text()
    values = {"$http_host": "desk.example.com", "$host": "desk.example.com", "$remote_addr": client, "$scheme": "https"}
    headers = {}
    for name, value in re.findall(r"proxy_set_header (\S+) (\S+);", docs):
        headers[name] = values.get(value, value)
    assert {"Host", "X-Forwarded-Proto", "X-Forwarded-For"} <= set(headers), headers
    return headers


def test_sign_in_works_behind_the_documented_tls_proxy_and_its_cookies_are_secure(tmp_path: Path) -> None:
    proxy = _nginx_headers("203.0.113.7") | {"Origin": "https://desk.example.com", "Accept": "text/html"}
    extra = ("--api-keys-file", _keys_file(tmp_path), "--allowed-host", "desk.example.com")
    with served(tmp_path, *extra, "--trusted-proxy", "127.0.0.1") as (url, _log):
        with httpx.Client(base_url=url, headers=proxy, timeout=30) as browser:
            login = browser.post("/login", data={"key": KEYS["root"][1], "next": "/submit"})
            assert login.status_code == 303, login.text
            assert "secure" in login.headers["set-cookie"].lower()
            # the client reaches the desk over http, where a Secure cookie is never sent: as the proxy would
            cookie = {"Cookie": "; ".join(f"{k}={v}" for k, v in login.cookies.items())}
            page = browser.get("/submit", headers=cookie)
            assert page.status_code == 200 and "Signed in as" in page.text
            assert all("secure" in c.lower() for c in page.headers.get_list("set-cookie"))
            token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
            form = {"task": "qa", "csrf_token": token, **ITEM}
            made = browser.post("/submit", data=form, headers=cookie)
            assert made.status_code == 303 and made.headers["location"].startswith("/audits/"), made.text
    with served(tmp_path, *extra) as (url, _log):  # the same headers from a proxy the desk was not told of
        refused = httpx.post(url + "/login", data={"key": KEYS["root"][1]}, headers=proxy)
        assert refused.status_code == 403 and "cross-site request refused" in refused.text
