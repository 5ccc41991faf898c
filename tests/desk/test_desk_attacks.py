"""The desk's server against clients that send their body a byte at a time, keep a connection open with half of a
second request, send junk, or flood it with uploads (issue 44), each at a 1,024 open-file limit: health keeps
answering, the slow ones are closed, the log stays a few lines."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.desk import KEYS, api_keys, auth, served, wait_for

pytestmark = pytest.mark.slow  # starts processes, holds hundreds of sockets


def _raise_own_limit(n: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))


def _post_headers(path: str, length: int, content_type: str = "application/x-ndjson") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _open(port: int, n: int, head: bytes) -> list[socket.socket]:
    _raise_own_limit(n)
    sockets = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        sock.sendall(head)
        sockets.append(sock)
    return sockets


def _trickle(sockets: list[socket.socket], seconds: float, every_s: float = 3.0) -> None:
    """One body byte on each open socket every `every_s` seconds (those the server closed are skipped)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for sock in sockets:
            try:
                sock.send(b"{")
            except OSError:
                continue
        time.sleep(every_s)


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(65536) == b"" or _closed(sock)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _healthy(url: str) -> bool:
    """Health answers 200 within a bound generous enough for a loaded machine: it fails on a held desk, not a slow
    one (no wall-clock figure is asserted)."""
    return httpx.get(url + "/v1/health", timeout=30).status_code == 200


def test_slow_bodies_are_closed_and_never_hold_the_desk(tmp_path: Path) -> None:
    """700 connections send their headers, then a body byte every 3 s: at the cap the slowest makes room, so
    health answers throughout; within one rate window all of them are closed; one log line says so."""
    with served(tmp_path, "--header-timeout", "3") as (url, log):
        port = int(url.rsplit(":", 1)[1])
        sockets = _open(port, 700, _post_headers("/v1/audits", 100_000, "application/json"))
        try:
            trickling = threading.Thread(target=_trickle, args=(sockets, 14.0), daemon=True)
            trickling.start()
            assert all(_healthy(url) for _ in range(10))
            trickling.join()
            assert sum(_closed(sock) for sock in sockets) == 700
            assert _healthy(url)
        finally:
            for sock in sockets:
                sock.close()
        text = log.read_text()
        assert "whose request body came too slowly" in text and "Traceback" not in text, text[-3000:]
        assert len(text.splitlines()) < 20, text[-3000:]


def test_a_second_request_on_a_connection_has_a_header_deadline_too(tmp_path: Path) -> None:
    with served(tmp_path, "--header-timeout", "2") as (url, _log):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            # closed at the header deadline (the keep-alive timer stopped at the first byte), not left open
            wait_for(lambda: _closed(sock), timeout=10, what="the half-sent second request to be closed")


def test_malformed_requests_are_one_log_line_a_while(tmp_path: Path) -> None:
    with served(tmp_path, "--verbose") as (url, log):
        port = int(url.rsplit(":", 1)[1])
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
                assert sock.recv(4096).startswith(b"HTTP/1.1 400")
        lines = [line for line in log.read_text().splitlines() if "Invalid HTTP request" in line]
        assert len(lines) == 1 and "time(s) since the last report" in lines[0], lines


def test_uploads_beyond_the_slots_are_429_before_their_body_is_read(tmp_path: Path) -> None:
    """660 raw uploads at once, each sending slowly, at a 1,024 open-file limit: all but the upload slots are
    refused with 429 at once, no "Too many open files" anywhere, and health answers throughout."""
    with served(tmp_path, "--max-uploads", "4", "--max-uploads-per-key", "2") as (url, log):
        port = int(url.rsplit(":", 1)[1])
        sockets = _open(port, 660, _post_headers("/v1/batches?task=qa", 5_000_000) + b"x" * 2000)
        try:
            answers = []
            for sock in sockets[:20]:
                sock.settimeout(5)
                try:
                    answers.append(sock.recv(4096))
                except TimeoutError:
                    answers.append(b"")  # still being read: one of the slots
            refused = [a for a in answers if a.startswith(b"HTTP/1.1 429")]
            assert len(refused) == 18, answers  # no keys: one client ("local") with two slots
            assert b"retry-after: 5" in refused[0].lower() and b"upload(s) already being read" in refused[0]
            assert _healthy(url)
        finally:
            for sock in sockets:
                sock.close()
        assert "Too many open files" not in log.read_text()


def test_upload_slots_are_counted_per_key_and_in_all(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in api_keys()))
    extra = ("--api-keys-file", str(keys), "--max-uploads", "3", "--max-uploads-per-key", "2")
    with served(tmp_path, *extra) as (url, _log):
        port = int(url.rsplit(":", 1)[1])

        def upload(name: str, chunked: bool = False) -> socket.socket:
            head = _post_headers("/v1/batches?task=qa", 1_000_000).replace(
                b"\r\n\r\n", f"\r\nAuthorization: Bearer {KEYS[name][1]}\r\n\r\n".encode(), 1
            )
            if chunked:  # no Content-Length: the body limit reads it into memory, so the slot must come first
                head = head.replace(b"Content-Length: 1000000", b"Transfer-Encoding: chunked")
                return _open(port, 1, head + b"64\r\n" + b" " * 100 + b"\r\n")[0]
            return _open(port, 1, head + b" " * 100)[0]

        held = [upload("sam"), upload("sam", chunked=True), upload("root")]
        try:
            time.sleep(0.5)
            assert not any(_closed(sock) for sock in held)  # three slots, all being read
            third = httpx.post(url + "/v1/batches?task=qa", content=b"{}", headers=auth("sam"))
            assert third.status_code == 429 and "sam: 2 upload(s) already being read (at most 2)" in third.text
            over = httpx.post(url + "/v1/batches?task=qa", content=b"{}", headers=auth("alice"))
            assert over.status_code == 429 and "reading 3 uploads already" in over.text
            assert int(over.headers["Retry-After"]) > 0
        finally:
            for sock in held:
                sock.close()

        # the slots are given back when their requests end: then an upload is read, and refused for what it is
        def read() -> httpx.Response | None:
            answer = httpx.post(url + "/v1/batches?task=qa", content=b"{}", headers=auth("sam"))
            return None if answer.status_code == 429 else answer

        after = wait_for(read, what="the upload slots to be given back")
        assert after.status_code == 422, after.text


def test_large_uploads_are_parsed_where_health_does_not_wait_for_them(tmp_path: Path) -> None:
    """Three 9 MB uploads of 9,000 lines at once: each is queued whole, and health answers throughout (it waited
    6 s when the parsing shared the server's process and reads waited behind the batch's write lock)."""
    line = {"question": "Capital of France?", "response": "Paris is the capital. " * 25, "reference": "Paris. " * 40}
    body = "".join(json.dumps({"id": f"r{i}", **line}) + "\n" for i in range(9000)).encode()
    # 27,000 audits waiting: above the default cap of 20,000, which holds against simultaneous batches
    extra = ("--max-uploads-per-key", "3", "--max-body-mb", "12", "--key-max-pending", "30000")
    with served(tmp_path, *extra) as (url, _log):
        answers: list[httpx.Response] = []

        def upload() -> None:
            headers = {"Content-Type": "application/x-ndjson"}
            answers.append(httpx.post(url + "/v1/batches?task=qa", content=body, headers=headers, timeout=300))

        uploads = [threading.Thread(target=upload) for _ in range(3)]
        for thread in uploads:
            thread.start()
        # an order of events, not a duration: health answered while all three uploads were still being parsed
        # (behind the batch's write lock it answered only after one of them was stored)
        answered_while_parsing = 0
        while any(thread.is_alive() for thread in uploads):
            assert _healthy(url)
            answered_while_parsing += all(thread.is_alive() for thread in uploads)
            time.sleep(0.1)
        assert [a.status_code for a in answers] == [202] * 3 and {a.json()["total"] for a in answers} == {9000}
        assert answered_while_parsing >= 1
