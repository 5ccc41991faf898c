"""Nothing read before the key (issue 63), against a real `debate serve` on 127.0.0.1 at a 1,024 open-file limit:
a body from a client with no key (or a logged-out session) is refused from its headers, before a byte of it is
read, on every route; multipart only where an upload is expected; the bytes of bodies in flight bounded; HEAD,
OPTIONS and pipelined requests answered as HTTP says; the session cookie sealed; a long field never echoed whole."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from markov_debate.desk.auth import ApiKey, hash_key
from tests.support.desk import KEYS, api_keys, auth, served

pytestmark = pytest.mark.slow  # one desk process for the module

_MB = 1024 * 1024
_MORE = {"ann": ("submitter", "ann-secret-key"), "bob": ("admin", "bob-secret-key")}


def _auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {_MORE[name][1]}"}


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("gate")
    keys = folder / "keys.txt"
    # a key each for the tests that spend submissions (3 a minute here)
    mine = [*api_keys(), *(ApiKey(name=n, role=r, sha256=hash_key(k)) for n, (r, k) in _MORE.items())]
    keys.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in mine))
    extra = ("--api-keys-file", str(keys), "--key-submits-per-minute", "3", "--max-bodies-mb", "1.5")
    with served(folder, *extra) as (url, log):
        yield url, log


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _head(path: str, length: int, kind: str, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {kind}", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (or `timeout`)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def _server_files(url: str) -> int:
    port = str(_port(url))
    [server] = [
        p
        for p in psutil.process_iter(["cmdline"])
        if port in (p.info["cmdline"] or []) and "serve" in p.info["cmdline"]
    ]
    return server.num_fds()


MULTIPART = "multipart/form-data; boundary=XX"


@pytest.mark.parametrize(
    ("path", "kind", "status"),
    [
        ("/login", MULTIPART, b"415"),  # the sign-in form is urlencoded, and small
        ("/submit", MULTIPART, b"415"),  # multipart on a route that takes no upload
        ("/logout", "application/x-www-form-urlencoded", b"401"),
        ("/audits/1/cancel", "application/x-www-form-urlencoded", b"401"),
        ("/v1/audits/1/claims/c0/reviews", "application/json", b"401"),
        ("/v1/audits", "application/json", b"401"),
        ("/v1/batches?task=qa", MULTIPART, b"401"),
    ],
)
def test_a_body_from_nobody_is_refused_from_its_headers(
    desk: tuple[str, Path], path: str, kind: str, status: bytes
) -> None:
    """Headers announcing 9 MB, and 2 KB of body: the answer comes at once, and the connection is closed without
    the rest being read."""
    url, _log = desk
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
        sock.sendall(_head(path, 9 * _MB, kind) + b"x" * 2048)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert b"connection: close" in answer.lower()


def test_keyless_uploads_hold_no_file_and_health_answers(desk: tuple[str, Path]) -> None:
    """130 keyless connections, each starting 8 file parts of 1.05 MB to /login or /submit (the attack that took
    every handle at 1,024): each is refused and closed at once, and the server holds as many files as before."""
    url, _log = desk
    before = _server_files(url)
    part = b'--XX\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n\r\n' + b"a" * 1_100_000 + b"\r\n"
    sockets = []
    try:
        for n in range(130):
            sock = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
            sock.sendall(_head("/login" if n % 2 else "/submit", 8 * len(part), MULTIPART) + part[:4096])
            sockets.append(sock)
        answers = [_answer(sock, 5) for sock in sockets]
        assert all(a.startswith(b"HTTP/1.1 415") for a in answers), {a[:40] for a in answers}
        assert httpx.get(url + "/v1/health", timeout=10).status_code == 200
        assert _server_files(url) <= before + 5
    finally:
        for sock in sockets:
            sock.close()


def test_a_logged_out_session_spends_nothing_of_its_owner(desk: tuple[str, Path]) -> None:
    """Signed in, then out: the copied cookie's posts go back to the sign-in page (a browser) or get 401 (the API),
    and none of them spends the owner's 3 submissions a minute."""
    url, _log = desk
    with httpx.Client(base_url=url) as browser:
        signed = browser.post("/login", data={"key": _MORE["ann"][1], "next": "/"})
        assert signed.status_code == 303
        cookie = browser.cookies["desk_session"]
        page = browser.get("/submit", headers={"Accept": "text/html"}).text
        token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        assert browser.post("/logout", data={"csrf_token": token}).status_code == 303
    form = {"question": "q", "response": "r", "task": "qa", "csrf_token": token}
    with httpx.Client(base_url=url, cookies={"desk_session": cookie}) as thief:
        for _ in range(5):
            sent = thief.post("/submit", data=form, headers={"Accept": "text/html"})
            assert sent.status_code == 303 and sent.headers["location"].startswith("/login"), sent.text
            api = thief.post("/v1/audits", json={"question": "q", "response": "r"})
            assert api.status_code == 401, api.text
    queued = httpx.post(url + "/v1/audits", json={"question": "q", "response": "r"}, headers=_auth("ann"))
    assert queued.status_code == 202, queued.text


def test_the_session_cookie_says_nothing_of_its_owner(desk: tuple[str, Path]) -> None:
    url, _log = desk
    with httpx.Client(base_url=url) as browser:
        assert browser.post("/login", data={"key": KEYS["alice"][1], "next": "/"}).status_code == 303
        cookie = browser.cookies["desk_session"]
        assert browser.get("/v1/stats").status_code == 200  # it works
    raw = base64.urlsafe_b64decode(cookie + "=" * (-len(cookie) % 4))
    assert b"alice" not in raw and b"reviewer" not in raw and "alice" not in cookie
    # changed by one character, it is nobody's
    forged = cookie[:-2] + ("A" if cookie[-2] != "A" else "B") + cookie[-1]
    assert httpx.get(url + "/v1/stats", cookies={"desk_session": forged}).status_code == 401


def test_bodies_in_flight_are_bounded(desk: tuple[str, Path]) -> None:
    """With 1.5 MiB of bodies allowed in flight: one keyed 1 MB body being sent holds its bytes, a second is 503
    with Retry-After before it is read, and once the first ends the second goes through."""
    url, _log = desk
    key = f"Authorization: Bearer {KEYS['alice'][1]}"
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as first:
        first.sendall(_head("/v1/audits/1/claims/c0/reviews", _MB, "application/json", key) + b"{" * 1000)
        time.sleep(0.3)
        second = httpx.post(
            url + "/v1/audits/1/claims/c0/reviews",
            content=b" " * (_MB - 20) + b'{"decision":"confirm"}',
            headers={**auth("alice"), "Content-Type": "application/json"},
        )
        assert second.status_code == 503 and int(second.headers["Retry-After"]) > 0, second.text
    later = httpx.post(
        url + "/v1/audits/999/claims/c0/reviews",
        content=b" " * (_MB - 20) + b'{"decision":"confirm"}',
        headers={**auth("alice"), "Content-Type": "application/json"},
    )
    assert later.status_code == 404, later.text  # read, parsed and answered for what it is


def test_a_large_json_body_fails_as_a_small_one_does(desk: tuple[str, Path]) -> None:
    """Bodies over 64 KB are parsed off the event loop; what they say when they do not parse is unchanged: the
    byte of a syntax error, the depth past the limit."""
    url, _log = desk
    headers = {**auth("alice"), "Content-Type": "application/json"}
    broken = b'{"decision": "confirm", "note": "' + b"n" * 200_000 + b'" oops}'
    answer = httpx.post(url + "/v1/audits/1/claims/c0/reviews", content=broken, headers=headers)
    assert answer.status_code == 400 and f"not valid JSON at byte {len(broken) - 5}" in answer.json()["detail"]
    deep = b"[" * 100_000 + b"]" * 100_000
    answer = httpx.post(url + "/v1/audits/1/claims/c0/reviews", content=deep, headers=headers)
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["detail"], answer.text


def test_head_options_and_an_unknown_method(desk: tuple[str, Path]) -> None:
    url, _log = desk
    head = httpx.head(url + "/v1/health")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    options = httpx.options(url + "/v1/audits")
    assert options.status_code == 204 and options.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert "access-control-allow-origin" not in options.headers
    refused = httpx.delete(url + "/v1/audits", headers=auth("root"))
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert httpx.options(url + "/v1/nothing-here").status_code == 404


def test_pipelined_requests_are_each_answered(desk: tuple[str, Path]) -> None:
    url, _log = desk
    body = b'{"decision": "confirm"}'
    review = _head(
        "/v1/audits/999/claims/c0/reviews", len(body), "application/json", f"Authorization: Bearer {KEYS['alice'][1]}"
    )
    health = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
        sock.sendall(
            health
            + review
            + body
            + health
            + b"HEAD /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        answer = _answer(sock)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)  # a response follows the previous body directly
    assert statuses == [b"200", b"404", b"200", b"200"], answer[:2000]


def test_a_long_field_is_never_echoed_whole(desk: tuple[str, Path]) -> None:
    url, _log = desk
    big = "x" * 1_000_000
    for sent in (
        httpx.post(url + "/v1/audits", json={"task": big, "response": "r"}, headers=auth("sam")),
        httpx.post(url + "/v1/audits", json={"response": "r", "overrides": {big: 1}}, headers=auth("sam")),
        httpx.post(
            url + "/v1/batches",
            files={"file": ("a.jsonl", b'{"response": "r"}\n')},
            data={"task": big},
            headers=auth("sam"),
        ),
    ):
        assert sent.status_code == 422 and len(sent.content) < 2000, (sent.status_code, sent.text[:300])
        assert "1,000,000 characters" in sent.text or "1000000 characters" in sent.text


def test_malformed_multipart_bodies_are_one_log_line_a_while(desk: tuple[str, Path]) -> None:
    url, log = desk
    for _ in range(3):  # the key's submissions a minute
        answer = httpx.post(
            url + "/v1/batches?task=qa",
            content=b"--XX\r\nbad header line\r\n\r\nx\r\n--XX--\r\n",
            headers={**_auth("bob"), "Content-Type": MULTIPART},
        )
        assert answer.status_code in (400, 422), answer.text
    lines = [line for line in log.read_text().splitlines() if "multipart" in line]
    assert len(lines) == 1 and "time(s) since the last report" in lines[0], lines
    assert json.dumps(lines)  # readable text, one line
