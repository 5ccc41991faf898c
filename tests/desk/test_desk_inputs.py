"""Inputs off the easy path at the desk's edge (issue 37): a NUL in a URL is a 400 naming where, before any query
reaches PostgreSQL (which cannot store one and would fail as if it were down); blank lines count toward an upload's
line limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.desk import ThreadedDesk, api_keys, fresh_database, settings_for


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


def test_text_no_store_holds_in_a_body_is_a_422_naming_the_field_on_postgres(postgres: str) -> None:
    """Issue 73: a review note holding a NUL was answered 503 "try again shortly" with Retry-After (PostgreSQL
    refused the write), so a client retried forever. The desk's one rule (`unstorable`) refuses it at the door, in
    every body that reaches a column: a review's note (API and form) and a batch's name."""
    settings = settings_for(fresh_database(postgres), "http://127.0.0.1:9/v1", jobs=0, keys=api_keys())
    with ThreadedDesk(settings) as desk:
        client = desk.client("root")
        note = client.post("/v1/audits/1/claims/c0/reviews", json={"decision": "confirm", "note": "a\u0000b"})
        assert note.status_code == 422 and note.json()["detail"].startswith("note: "), note.text
        assert "NUL" in note.json()["detail"] and "Retry-After" not in note.headers
        surrogate = client.post(
            "/v1/audits/1/claims/c0/reviews",
            content=b'{"decision": "confirm", "note": "\\ud800"}',
            headers={"Content-Type": "application/json"},
        )
        assert surrogate.status_code == 422 and surrogate.json()["detail"].startswith("note: "), surrogate.text
        line = json.dumps({"id": "1", **FRANCE, "response": "Paris."}) + "\n"
        upload = client.post("/v1/batches", files={"file": ("ok.jsonl", line)}, data={"task": "qa", "name": "a\x00b"})
        assert upload.status_code == 422 and upload.json()["detail"].startswith("name: "), upload.text
        assert client.get("/v1/batches").json() == [] and client.get("/v1/health").json()["ok"] is True


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


FRANCE = {"question": "What is the capital of France?", "reference": "Paris is the capital of France."}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"response": ' + b"[" * 999 + b"]" * 999 + b"}", "body: nested too deeply to read at byte 76"),
        (b'{"response": "caf\xe9 au lait"}', "body: not valid UTF-8 at byte 17 (send JSON as UTF-8)"),
        (b'{"response": "x", "overrides": {"max_rounds": ' + b"9" * 5000 + b"}}", "body: a number at byte 46 has"),
        # é is 2 bytes: the offset is in bytes, the column in characters
        (b'{"response": "\xc3\xa9t\xc3\xa9", "task": qa}', "body: not valid JSON at byte 30 (line 1, column 29)"),
        (b'{\n  "response": "x",\n  "task": "qa",,\n}', "body: not valid JSON at byte 36 (line 3, column 16)"),
    ],
)
def test_a_body_that_does_not_parse_is_a_4xx_naming_the_byte(tmp_path: Path, body: bytes, detail: str) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    with ThreadedDesk(settings) as desk:
        refused = desk.client().post("/v1/audits", content=body, headers={"Content-Type": "application/json"})
        assert refused.status_code == 400, refused.text  # every body that does not parse, JSON syntax too
        assert refused.json()["detail"].startswith(detail), refused.json()["detail"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({**FRANCE, "response": "x", "claims": [["a"] * 100_000]}, "claims: Value error, claim 0 has 100000 parts"),
        ({"task": "rag", "response": "Paris [1]."}, "task rag needs the sources as `reference`"),
        ({"task": "summarization", "response": "A short summary."}, "task summarization needs the source document"),
        ({**FRANCE, "response": "x", "claims": ["ok", "y" * 2_001]}, "claims.1: 2,001 characters; the limit is 2,000"),
        ({**FRANCE, "response": "x", "claims": [["s" * 1_000, "p", "o" * 1_000]]}, "claims.0: 2,004 characters"),
        ({**FRANCE, "response": "x", "overrides": {"prefilters": ["citations"] * 5_000}}, "overrides.prefilters: "),
        # issue 44: the answer names what is wrong without echoing a large input back
        ({**FRANCE, "response": "x", "overrides": {"chain": "c" * 100_000}}, "overrides.chain: Value error, unknown"),
        ({**FRANCE, "response": "x", "overrides": {"prefilters": ["rules"] * 5_000}}, "overrides: Value error, a "),
        ({"task": "rag", "response": "Paris [1].", "reference": {}}, "reference: no sources given"),
        ({"task": "rag", "response": "Paris [1].", "reference": []}, "reference: no sources given"),
        ({"task": "rag", "response": "Paris [1].", "reference": {"1": " "}}, "reference: every source's text is blank"),
    ],
)
def test_what_a_worker_would_refuse_is_refused_at_submit(tmp_path: Path, body: dict[str, object], detail: str) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        refused = client.post("/v1/audits", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"].startswith(detail), refused.json()["detail"]
        assert len(refused.content) < 2_000  # the input is named, not echoed
        assert client.get("/v1/audits").json()["total"] == 0
        if "overrides" in body:
            return  # a batch line's own overrides: test_a_batch_lines_overrides_are_honoured_or_its_line_is_refused
        # the same in a batch: that line is listed, the others are queued
        lines: list[dict[str, object]] = [{"id": "bad", **body}, {"id": "good", **FRANCE, "response": "Paris."}]
        task = str(body.get("task", "qa"))
        if task != "qa":
            lines[1]["reference"] = {"1": "Paris."} if task == "rag" else "Paris is in France."
        made = client.post(
            "/v1/batches",
            params={"task": task},
            content="".join(json.dumps({k: v for k, v in line.items() if k != "task"}) + "\n" for line in lines),
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert made.status_code == 202, made.text
        batch = made.json()
        assert batch["total"] == 1 and len(batch["input_errors"]) == 1
        message = batch["input_errors"][0]["message"]
        assert message.startswith("line 1: ") and detail.split(": ")[-1] in message, message


@pytest.mark.parametrize(
    ("overrides", "status"),
    [
        ({"max_rounds": 12.0}, 202),  # JSON Schema's integer: 12.0 is 12
        ({"max_rounds": 12}, 202),
        ({"max_rounds": True}, 422),
        ({"max_rounds": "12"}, 422),
        ({"max_rounds": 2.5}, 422),
        ({"prefilters": ["rules", "rules"]}, 422),
    ],
)
def test_override_counts_are_whole_numbers_as_the_schema_says(
    tmp_path: Path, overrides: dict[str, object], status: int
) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    with ThreadedDesk(settings) as desk:
        answer = desk.client().post("/v1/audits", json={**FRANCE, "response": "Paris.", "overrides": overrides})
        assert answer.status_code == status, answer.text


def test_a_passage_without_text_is_no_evidence_not_a_refused_item(tmp_path: Path) -> None:
    """A qa item whose sources include one with an empty text is queued (that source is left out of its evidence);
    only task rag reads sources for their ids."""
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    reference = [{"id": "a", "text": ""}, {"id": "b", "text": "Paris is the capital of France."}]
    with ThreadedDesk(settings) as desk:
        answer = desk.client().post(
            "/v1/audits", json={"question": "Capital?", "response": "Paris.", "reference": reference}
        )
        assert answer.status_code == 202, answer.text


@pytest.mark.parametrize("form", ["jsonl", "json", "multipart"])
def test_a_number_too_long_to_read_is_one_lines_error_in_every_upload_form(tmp_path: Path, form: str) -> None:
    # With keys: a multipart post without one is a browser's form, which needs the form's CSRF token.
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0, keys=api_keys())
    big = "7" * 5_000
    bad, good = {"id": "bad", **FRANCE, "response": "x"}, {"id": "good", **FRANCE, "response": "Paris."}
    jsonl = json.dumps(bad)[:-1] + f', "n": {big}}}\n' + json.dumps(good) + "\n"
    array = "[" + json.dumps(bad)[:-1] + f', "n": {big}}}, ' + json.dumps(good) + "]"
    with ThreadedDesk(settings) as desk:
        client = desk.client("sam")
        if form == "multipart":
            made = client.post("/v1/batches", files={"file": ("in.jsonl", jsonl.encode(), "application/x-ndjson")})
        else:
            kind = "application/x-ndjson" if form == "jsonl" else "application/json"
            made = client.post(
                "/v1/batches", content=jsonl if form == "jsonl" else array, headers={"Content-Type": kind}
            )
        assert made.status_code == 202, made.text
        assert [e["line"] for e in made.json()["input_errors"]] == [1]
        assert "more than 4300 digits" in made.json()["input_errors"][0]["message"]
        assert made.json()["total"] == 1


def test_cut_off_bodies_are_one_log_line_a_while_not_a_traceback_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 44: a client that closes its connection mid-body (JSON, JSON lines, multipart) is logged once per
    interval with a count, never as "Exception in ASGI application" with a traceback."""
    import socket
    import time

    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    kinds = (
        ("/v1/audits", "application/json"),
        ("/v1/batches", "application/x-ndjson"),
        ("/v1/batches", "multipart/form-data; boundary=xx"),
    )
    with caplog.at_level("INFO"), ThreadedDesk(settings) as desk:
        host, port = desk.url.removeprefix("http://").split(":")
        for path, kind in kinds * 4:
            with socket.create_connection((host, int(port))) as cut:
                head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {kind}\r\nContent-Length: 100000\r\n\r\n"
                cut.sendall(head.encode() + b'{"id": "1", "resp')
                time.sleep(0.1)
        time.sleep(0.5)
        assert desk.client().get("/v1/health").status_code in (200, 503)
    lines = [r for r in caplog.records if "closed its connection" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert not [r for r in caplog.records if r.exc_info or "Exception in ASGI" in r.getMessage()]


def test_a_batch_lines_overrides_are_honoured_or_its_line_is_refused(tmp_path: Path) -> None:
    """Issue 44: per-line `overrides` are not dropped: a line's own are stored with its audit (the worker runs
    with them); a line whose overrides this desk refuses is listed in input_errors, naming them."""
    settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", "http://127.0.0.1:9/v1", jobs=0)
    lines = [
        {"id": "own", **FRANCE, "response": "Paris.", "overrides": {"max_rounds": 7, "chain": "always-trust"}},
        {"id": "plain", **FRANCE, "response": "Paris."},
        {"id": "bad", **FRANCE, "response": "Paris.", "overrides": {"chain": "no-such-chain"}},
        {"id": "inconsistent", **FRANCE, "response": "Paris.", "overrides": {"min_rounds": 9, "max_rounds": 2}},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        made = client.post("/v1/batches", content=body, headers={"Content-Type": "application/x-ndjson"})
        assert made.status_code == 202, made.text
        errors = {e["line"]: e["message"] for e in made.json()["input_errors"]}
        assert sorted(errors) == [3, 4], errors
        assert "no-such-chain" in errors[3] and "min_rounds" in errors[4], errors
        audits = client.get("/v1/audits", params={"batch": made.json()["id"]}).json()["items"]
        stored = [client.get(f"/v1/audits/{a['id']}").json()["request"] for a in audits]
        overrides = sorted(json.dumps(r["overrides"], sort_keys=True) for r in stored)
        assert len(overrides) == 2
        assert any('"chain": "always-trust"' in o and '"max_rounds": 7' in o for o in overrides), overrides
