"""A hostile or careless caller: generated bodies (any JSON, wrong types, NUL, lone surrogates, bytes that are not
UTF-8, a body past the limit) and paths (any route name, any method), sent over HTTP to a running guard, get a
verified answer or a 4xx whose message names the field, never a 5xx of the guard's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.guard.conftest import GOOD, GuardServer, judge_config
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op
from tests.support.properties import Reached

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
_BODIES = st.one_of(
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "messages": st.lists(
                st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "tool"]), "content": _JSON}),
                min_size=1,
                max_size=3,
            )
        },
        optional={"sources": _JSON, "stream": st.booleans(), "model": st.text(max_size=5)},
    ).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
)


@pytest.fixture(scope="module")
def guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from markov_debate.guard.settings import GuardSettings, RouteSettings

    folder = tmp_path_factory.mktemp("guard")
    judge = FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))})
    upstream = FakeOpenAI(responder=lambda body: Reply(content=GOOD))
    with judge, upstream:
        settings = GuardSettings(
            upstream=upstream.base_url,
            db_url=f"sqlite:///{folder / 'desk.sqlite'}",
            verifier=judge_config(judge.base_url),
            max_body_bytes=4096,
            routes={"legal": RouteSettings(policy="flag")},
        )
        with GuardServer(settings) as server:
            yield server.base_url


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_BODIES)
@example(body=b'{"messages": [{"role": "user", "content": "q\\u0000 \\ud800"}], "sources": {"a": "\\udfff"}}')
@example(body=b"\xff\xfe not utf-8")
@example(body=b"[" * 2000 + b"]" * 2000)  # deeper than the JSON reader goes: a 400, never a 500
@example(body=b'{"messages": [{"role": "user", "content": "' + b"x" * 5000 + b'"}]}')
def test_any_body_is_answered_or_refused_in_one_line(guard: str, body: bytes, reached: Reached) -> None:
    """Correct outcome: the upstream's answer, its text unchanged, annotated with a verification (the default
    policy), streamed or not as asked; or a 400/413 whose one-line message names the field (`param`). A tenth of
    the examples at least are answered."""
    reached.require(answered=0.1)
    response = httpx.post(
        f"{guard}/chat/completions", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code in (200, 400, 413), response.text[:500]
    if response.status_code != 200:
        reached("refused")
        error: dict[str, Any] = response.json()["error"]
        assert error["message"] and "\n" not in error["message"] and error["type"] == "invalid_request_error"
        assert response.status_code == 413 or (
            error["param"] and error["message"].startswith(error["param"].split("[")[0])
        )
        return
    reached("answered")
    if response.headers["content-type"].startswith("text/event-stream"):
        chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        assert text == GOOD
        return
    answer = response.json()
    assert answer["choices"][0]["message"]["content"] == GOOD  # the upstream's words, unchanged
    verification = answer["verification"]
    assert verification["action"] in ("annotated", "passed-unverified"), verification
    assert response.headers["x-debate-action"] == verification["action"]


_ASK = {"messages": [{"role": "user", "content": "Where is Paris?"}], "sources": {"doc1": "Paris is in France."}}


def test_a_route_s_path_picks_its_settings_and_any_other_path_is_a_4xx(guard: str) -> None:
    root = guard.removesuffix("/v1")
    routed = httpx.post(f"{root}/route/legal/v1/chat/completions", json=_ASK, timeout=30)
    assert routed.status_code == 200 and routed.json()["verification"]["policy"] == "flag"
    plain = httpx.post(f"{guard}/chat/completions", json=_ASK, timeout=30)
    assert plain.status_code == 200 and plain.json()["verification"]["policy"] == "annotate"
    unknown = httpx.post(f"{root}/route/nope/v1/chat/completions", json=_ASK, timeout=30)
    assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]["message"]
    assert httpx.post(f"{root}/route/a/b/v1/chat/completions", json=_ASK, timeout=30).status_code == 404
    assert httpx.get(f"{guard}/chat/completions", timeout=30).status_code == 405


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.binary(max_size=20), method=st.sampled_from(["POST", "GET", "PUT"]))
@example(name="légal/../x".encode(), method="POST")
@example(name=b"legal", method="POST")
@example(name=b"'", method="POST")  # quoted with double quotes in the message
def test_any_route_name_and_method_get_an_answer_never_a_5xx(
    guard: str, name: bytes, method: str, reached: Reached
) -> None:
    """Correct outcome: POST to the configured route is answered under its policy; any other route is a 404 that
    quotes it, any other method a 405 that allows POST, each in the OpenAI error shape; never a 5xx."""
    root = guard.removesuffix("/v1")
    path = f"/route/{quote(name, safe='')}/v1/chat/completions"  # any bytes, "/" and invalid UTF-8 included
    response = httpx.request(method, root + path, json=_ASK, timeout=30)
    assert response.status_code < 500, (path, response.status_code, response.text[:300])
    if name in (b".", b".."):  # the client resolves the dot segments: the request goes to another path
        return
    if name == b"legal" and method == "POST":
        reached("routed")
        assert response.status_code == 200 and response.json()["verification"]["policy"] == "flag"
        return
    error = response.json()["error"]  # every refusal in the OpenAI error shape, as an OpenAI client reads it
    assert error["type"] == "invalid_request_error" and "\n" not in error["message"]
    if response.status_code == 405:
        reached("method")
        assert method != "POST" and response.headers["allow"] == "POST"
    else:
        reached("unknown route")
        assert response.status_code == 404, (path, response.status_code)
        assert re.match(r"no (route|such path) ['\"]", error["message"]), error  # quoted as Python quotes it


def _raw(address: str, request: bytes) -> bytes:
    """Send `request` on a socket of its own; what came back before the server closed it."""
    import socket

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        try:
            conn.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending: what it answered is read below
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def test_headers_past_the_limit_are_answered_431_and_the_connection_closed(guard: str) -> None:
    """Issue 73: the guard kept every header byte (60 connections x 32 MB of headers: 2.3 GB). Its line and
    headers get 64 KiB (ServerLimits.header_bytes), as the desk's do; a request within them is served as ever."""
    address = guard.removeprefix("http://").split("/", 1)[0]
    flood = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
        b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(2000)
    )
    answer = _raw(address, flood)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    health = _raw(
        address, b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: " + b"a" * 30000 + b"\r\n\r\n"
    )
    assert health.startswith(b"HTTP/1.1 200 "), health[:200]


def test_a_keyless_guard_serves_no_request_a_web_page_could_forge(guard_for: Any) -> None:
    """Issue 73: a POST with a foreign Host, a foreign Origin and text/plain was answered and the upstream got the
    guard's key. Without keys the guard answers only to its names (DNS rebinding cannot make a browser send one),
    takes JSON only (a page cannot send it cross-site without asking first, and the guard never grants that) and
    refuses another site's Origin; none of those reach the upstream. With keys, a key is the defence."""
    judge = FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))})
    upstream = FakeOpenAI(responder=lambda body: Reply(content=GOOD))
    ask = {"messages": [{"role": "user", "content": "Where is Paris?"}], "sources": {"doc1": "Paris is in France."}}
    with judge, upstream:
        url = guard_for(upstream.base_url, judge.base_url, allowed_hosts=("127.0.0.1", "guard.example.com")).base_url
        port = url.split(":")[2].split("/")[0]
        chat = url + "/chat/completions"
        rebound = httpx.post(chat, json=ask, headers={"Host": f"rebind.attacker.example:{port}"}, timeout=30)
        assert rebound.status_code == 400 and "host" in rebound.json()["error"]["message"]
        plain = httpx.post(chat, content=json.dumps(ask), headers={"Content-Type": "text/plain"}, timeout=30)
        assert plain.status_code == 415 and "application/json" in plain.json()["error"]["message"]
        foreign = httpx.post(chat, json=ask, headers={"Origin": "https://attacker.example"}, timeout=30)
        assert foreign.status_code == 403 and "origin" in foreign.json()["error"]["message"]
        models = httpx.get(url + "/models", headers={"Host": "rebind.attacker.example"}, timeout=30)
        assert models.status_code == 400
        assert upstream.calls == []  # nothing of theirs reached the upstream
        # the guard's own names, an own-origin page and a plain client are served
        named = httpx.post(chat, json=ask, headers={"Host": f"guard.example.com:{port}"}, timeout=60)
        own = httpx.post(chat, json=ask, headers={"Origin": f"http://127.0.0.1:{port}"}, timeout=60)
        client = httpx.post(chat, json=ask, timeout=60)
        assert [r.status_code for r in (named, own, client)] == [200, 200, 200]
        assert len(upstream.calls) == 3
