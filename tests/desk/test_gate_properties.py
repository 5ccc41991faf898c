"""The gate's rule over generated requests (hypothesis, in process at the ASGI level): a request that carries a body
reaches the app only from a caller with a valid key or a live session, or as the small urlencoded sign-in form, and
multipart only on an upload route; every other such request is answered without a single read of its body. A
request without a body always reaches the app, with the caller the gate found."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markov_debate.desk.auth import Principal
from markov_debate.desk.gate import PUBLIC_BODIES, CallerGate
from markov_debate.desk.quotas import UPLOADING
from markov_debate.desk.security import SESSION_COOKIE, Guard
from tests.support.desk import KEYS, api_keys
from tests.support.properties import Reached, examples

REVOKED: set[str] = set()
GUARD = Guard(api_keys(), "a-secret", revoked=lambda sid: sid in REVOKED)
KEY_OBJECTS = {k.name: k for k in api_keys()}
LIVE = GUARD.session_cookie(KEY_OBJECTS["sam"])
ENDED = GUARD.session_cookie(KEY_OBJECTS["alice"])
REVOKED.add(GUARD.session_of(ENDED)[0])  # type: ignore[index]

PATHS = ["/login", "/logout", "/submit", "/batches", "/v1/audits", "/v1/batches", "/v1/audits/1/claims/c0/reviews"]
KINDS = ["application/json", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", ""]
CALLERS: dict[str, tuple[list[tuple[bytes, bytes]], str | None]] = {
    "nobody": ([], None),
    "bearer": ([(b"authorization", f"Bearer {KEYS['root'][1]}".encode())], "root"),
    "x-api-key": ([(b"x-api-key", KEYS["alice"][1].encode())], "alice"),
    "wrong key": ([(b"authorization", b"Bearer not-a-key")], None),
    "live session": ([(b"cookie", f"{SESSION_COOKIE}={LIVE}".encode())], "sam"),
    "ended session": ([(b"cookie", f"{SESSION_COOKIE}={ENDED}".encode())], None),
    "forged session": ([(b"cookie", f"{SESSION_COOKIE}={LIVE[:-3]}abc".encode())], None),
}


def _run(scope: dict[str, Any]) -> tuple[list[MutableMapping[str, Any]], int, MutableMapping[str, Any] | None]:
    """(what was sent, how many times the body was read, the scope the app got or None)."""
    reached: list[MutableMapping[str, Any]] = []
    reads = 0
    sent: list[MutableMapping[str, Any]] = []

    async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope)

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b"x", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    asyncio.run(CallerGate(app, guard=GUARD, uploads=UPLOADING)(scope, receive, send))
    return sent, reads, reached[0] if reached else None


@settings(
    max_examples=examples(4, why="one ASGI call in memory an example, a millisecond"),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(PATHS),
    method=st.sampled_from(["POST", "GET", "DELETE", "PUT"]),
    kind=st.sampled_from(KINDS),
    body=st.sampled_from(["none", "length", "zero", "chunked"]),
    caller=st.sampled_from(sorted(CALLERS)),
    client=st.ip_addresses(v=4).map(str),
)
def test_a_body_reaches_the_app_only_from_someone(
    path: str, method: str, kind: str, body: str, caller: str, client: str, reached: Reached
) -> None:
    headers, who = CALLERS[caller]
    headers = [*headers, (b"host", b"127.0.0.1")]
    if kind:
        headers.append((b"content-type", kind.encode()))
    headers += {
        "none": [],
        "length": [(b"content-length", b"9000000")],
        "zero": [(b"content-length", b"0")],
        "chunked": [(b"transfer-encoding", b"chunked")],
    }[body]
    scope = {"type": "http", "method": method, "path": path, "headers": headers, "client": (client, 5000), "state": {}}
    reached.require(passed=0.1, refused=0.1)
    sent, reads, inside = _run(scope)
    assert reads == 0  # the gate itself never reads a body
    if sent and sent[0]["status"] == 429:
        reached("throttled")
        # too many wrong keys from this address: the throttle, before anything else, and only for a wrong key
        assert caller == "wrong key" and inside is None
        return
    carries = body in ("length", "chunked")
    shape = kind.split(";")[0]
    if path in PUBLIC_BODIES and carries:
        allowed = shape == "application/x-www-form-urlencoded"
    elif carries and shape == "multipart/form-data" and path not in UPLOADING:
        allowed = False
    else:
        allowed = who is not None or not carries
    reached("passed" if allowed else "refused")
    if allowed:
        assert inside is not None and not sent, (caller, path, kind, body)
        found: Principal | None = inside["state"]["caller"]
        assert (found.name if found else None) == who
    else:
        assert inside is None
        start = sent[0]
        assert start["type"] == "http.response.start" and start["status"] in (303, 401, 415), start
        assert (b"connection", b"close") in start["headers"]
