"""The desk's server against clients that connect and send nothing, or half a request (issue 37): at a 1,024
open-file limit, 1,100 silent connections do not stall health, the log stays small, and a half-sent request is
closed at the header deadline."""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.desk import served, wait_for

pytestmark = pytest.mark.slow  # starts processes


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with served(tmp_path, "--header-timeout", "3") as running:
        yield running


def _silent(port: int, n: int) -> list[socket.socket]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    return [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(n)]


def test_silent_connections_do_not_stall_the_desk(desk: tuple[str, Path]) -> None:
    url, log = desk
    port = int(url.rsplit(":", 1)[1])
    assert "limits: at most 640 connections (open-file limit 1024)" in log.read_text()
    sockets = _silent(port, 1100)
    try:
        half = sockets[0]
        half.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1")  # never finished
        # liveness with a bound generous enough for a loaded machine: the silent connections do not hold it
        assert httpx.get(url + "/v1/health", timeout=30).status_code == 200
        # at the header deadline the silent and half-sent connections are closed: the newest one first shows it
        wait_for(lambda: _closed(sockets[-1]), timeout=15, what="the header deadline to close the newest connection")
        assert httpx.get(url + "/v1/health", timeout=5).status_code == 200
        # the oldest were closed to make room at the cap, the newest at the header deadline
        assert sum(_closed(sock) for sock in [*sockets[:50], *sockets[-50:]]) == 100
    finally:
        for sock in sockets:
            sock.close()
    assert log.stat().st_size < 1_000_000


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(0.5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:  # aborted by the server
        return True
    except TimeoutError:  # still open
        return False
