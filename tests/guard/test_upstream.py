"""The upstream's stream reader: however its bytes arrive, the events are the ones sent."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markov_debate.guard.upstream import StreamEvent, UpstreamError, _events
from tests.support.properties import examples


class _Content:
    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def iter_any(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part


class _Response:
    def __init__(self, parts: list[bytes]) -> None:
        self.content = _Content(parts)


def _read(parts: list[bytes]) -> list[StreamEvent]:
    async def run() -> list[StreamEvent]:
        return [e async for e in _events(cast(aiohttp.ClientResponse, _Response(parts)), 1 << 30)]

    return asyncio.run(run())


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if b > a]


_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=30)


@settings(max_examples=examples(2, why="a pure function, well under a millisecond an example"), deadline=None)
@given(
    contents=st.lists(_TEXT, min_size=1, max_size=5),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.data(),
)
def test_events_are_the_same_however_the_bytes_arrive(contents: list[str], newline: str, cuts: st.DataObject) -> None:
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": c}}]} for c in contents]
    # Each chunk's JSON over two data lines (joined by a newline, still the same JSON): a line break lost or added
    # inside an event would change it.
    halves = [json.dumps(c).split(", ", 1) for c in chunks]
    events = [f": keep-alive{newline}{newline}"]
    events += [f"data: {a},{newline}data: {b}{newline}{newline}" for a, b in halves]
    data = "".join([*events, f"data: [DONE]{newline}{newline}"]).encode()
    one_byte_reads = st.just(list(range(1, len(data))))
    where = cuts.draw(one_byte_reads | st.lists(st.integers(min_value=0, max_value=len(data)), max_size=12))
    got = _read(_split(data, where))
    assert [e.chunk for e in got[:-1]] == chunks
    assert got[-1].done and got[-1].chunk is None


def test_a_stream_without_done_is_malformed() -> None:
    with pytest.raises(UpstreamError) as caught:
        _read([b'data: {"choices": []}\n\n', b"data: {"])
    assert caught.value.cause == "malformed"


def test_the_environment_s_proxy_is_used_and_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY applies to the upstream as to the engine's model client (read once, at start); NO_PROXY exempts."""
    from markov_debate.guard.upstream import Upstream

    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "via the proxy"}}]}
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        seen.append(head.split(b"\r\n")[0])
        body = json.dumps(completion).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with server:
            upstream = Upstream("http://llm.invalid/v1", key=None, timeout_s=10)
            try:
                got = await upstream.complete({"model": "m", "messages": []}, auth=None, request_id="r")
            finally:
                await upstream.aclose()
            assert got == completion
            assert seen == [b"POST http://llm.invalid/v1/chat/completions HTTP/1.1"]
            with socket.socket() as closed:  # a port nothing listens on: reached directly, it refuses
                closed.bind(("127.0.0.1", 0))
                exempt = Upstream(f"http://127.0.0.1:{closed.getsockname()[1]}/v1", key=None, timeout_s=10)
            try:
                with pytest.raises(UpstreamError) as caught:
                    await exempt.complete({"model": "m", "messages": []}, auth=None, request_id="r")
            finally:
                await exempt.aclose()
            assert caught.value.cause == "down" and len(seen) == 1

    asyncio.run(run())
