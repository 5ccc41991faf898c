"""The limits against slow and silent clients hold the same with both of uvicorn's HTTP/1.1 parsers: h11 (the
desk's) and httptools (the guard's). A real server on 127.0.0.1 and raw sockets as the clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from markov_debate.desk.serving import ServerLimits, guarded_protocol

LIMITS = ServerLimits(connections=4, header_timeout_s=1.0, file_limit=1024, body_min_rate=1024.0, body_timeout_s=2.0)
PARSERS = ["h11", "httptools"]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body and answers with its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(params=PARSERS)
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    protocol = guarded_protocol(LIMITS, request.param)
    # The keep-alive timer is long, so a connection closed within seconds was closed by a limit.
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, http=protocol, lifespan="off", timeout_keep_alive=60)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(timeout=30)


def _request(body: bytes = b"") -> bytes:
    return b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _answer(sock: socket.socket) -> bytes:
    """One response (the app's bodies are a few digits: the head and body come in one read or two)."""
    data = b""
    while b"\r\n\r\n" not in data or not data.split(b"\r\n\r\n", 1)[1]:
        chunk = sock.recv(4096)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    return data


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:  # aborted by the server
        return True
    except TimeoutError:
        return False


def test_requests_sent_at_once_are_answered_on_one_connection(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_request(b"x" * 5000))
        assert _answer(sock).endswith(b"\r\n\r\n5000")
        sock.sendall(_request(b"y"))
        assert _answer(sock).endswith(b"\r\n\r\n1")


def test_half_sent_headers_are_closed_at_the_header_deadline(port: int) -> None:
    with _connect(port) as half:
        half.sendall(b"POST /x HTTP/1.1\r\nHost: t")
        assert not _closed_within(half, 0.5)
        assert _closed_within(half, 20)  # a bound for a loaded machine: it fails on a connection never closed


def test_the_next_request_on_a_connection_has_a_header_deadline_too(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_request(b"abc"))
        assert _answer(sock).endswith(b"\r\n\r\n3")
        # silent after its answer: closed at the 1 s header deadline, long before the keep-alive's 60
        assert _closed_within(sock, 20)


def test_a_body_still_arriving_past_its_time_is_closed(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < 30:
            try:
                sock.sendall(b"x" * 10)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = _closed_within(sock, 0.3)
        assert closed and time.monotonic() - started >= LIMITS.body_timeout_s


def test_at_the_cap_the_longest_idle_connection_makes_room(port: int) -> None:
    idle = []
    for _ in range(LIMITS.connections):
        sock = _connect(port)
        sock.sendall(_request())
        _answer(sock)
        idle.append(sock)
        time.sleep(0.05)  # an order of opening the server sees
    try:
        with _connect(port) as newest:
            newest.sendall(_request(b"ok"))
            assert _answer(newest).endswith(b"\r\n\r\n2")
        assert _closed_within(idle[0], 20)
        assert not any(_closed_within(sock, 0.05) for sock in idle[1:])
    finally:
        for sock in idle:
            sock.close()
