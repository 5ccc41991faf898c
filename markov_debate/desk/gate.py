"""Who is calling, decided from the request's headers before any byte of its body is read, and what the bodies in
flight may cost.

A request that carries a body and no valid key or session is refused here, on every route but the sign-in form:
before this gate, FastAPI read and parsed a form or JSON body (spooling each file part over 1 MB to a temp file) and
only then ran the route's authentication, so a client with no key spent the desk's file handles, memory and CPU
for free. The caller found here is kept on the request (`scope["state"]["caller"]`), so the route's own check, the
quotas and the failed-key throttle all read the same answer once.

What reaches the app is bounded too: multipart only where an upload is expected (one file part at most, read by
the upload route), the sign-in form small and urlencoded, and the bytes of all the bodies being read into memory at
once within a budget (the uploads, spooled to files and counted by their slots, aside).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import quote

from fastapi import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from markov_debate.desk.security import Guard, refuse

__all__ = [
    "LOGIN_BODY_BYTES",
    "PUBLIC_BODIES",
    "BodyBudget",
    "CallerGate",
    "HeadAndOptions",
    "allowed_methods",
    "content_type",
]

PUBLIC_BODIES = frozenset({"/login"})
"""Paths whose body a caller without a key may send: the sign-in form (its key is in the body)."""
LOGIN_BODY_BYTES = 8 * 1024
"""Largest sign-in form: a key, the page to return to and a token fit in a fraction of it."""
_CLOSE = {"Connection": "close"}
"""On a refusal before the body: the connection is closed rather than read to its end for the next request."""


def content_type(scope: Scope) -> str:
    raw: bytes = dict(scope.get("headers") or []).get(b"content-type", b"")
    return raw.decode("latin-1").split(";")[0].strip().lower()


def _carries_body(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or [])
    length = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (length is not None and length.strip() not in (b"", b"0"))


class CallerGate:
    """ASGI middleware: the caller from the headers; a body from nobody refused before it is read."""

    def __init__(self, app: ASGIApp, *, guard: Guard, uploads: Iterable[str]) -> None:
        self.app = app
        self.guard = guard
        self.uploads = frozenset(uploads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, kind, body = scope["path"], content_type(scope), _carries_body(scope)
        refusal = self._shape(path, kind) if body else None
        if refusal is not None:
            await refuse(scope, send, refusal[0], refusal[1], headers=_CLOSE)
            return
        try:
            caller = await self.guard.caller(scope)
        except HTTPException as exc:  # too many wrong keys from this client
            await refuse(scope, send, exc.status_code, str(exc.detail), headers={**(exc.headers or {}), **_CLOSE})
            return
        scope.setdefault("state", {})["caller"] = caller
        if caller is None and body and path not in PUBLIC_BODIES:
            await _unauthenticated(scope, send)
            return
        await self.app(scope, receive, send)

    def _shape(self, path: str, kind: str) -> tuple[int, str] | None:
        """A body this path never takes, refused by its headers."""
        if path in PUBLIC_BODIES:
            if kind != "application/x-www-form-urlencoded":
                return 415, "the sign-in form is sent as application/x-www-form-urlencoded"
            return None
        if kind == "multipart/form-data" and path not in self.uploads:
            return 415, "multipart/form-data is taken by the batch uploads only: send this form urlencoded or as JSON"
        return None


async def _unauthenticated(scope: Scope, send: Send) -> None:
    accept = dict(scope.get("headers") or []).get(b"accept", b"")
    if not scope["path"].startswith("/v1/") and b"text/html" in accept:
        # A browser whose session ended: back to the sign-in page, where it came from afterwards.
        target = "/login?next=" + quote(scope["path"], safe="/")  # any path, as ASCII
        headers = [(b"location", target.encode("ascii")), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 303, "headers": [*headers, (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    detail = "an API key is required (Authorization: Bearer KEY), or a session: sign in again"
    await refuse(scope, send, 401, detail, headers={"WWW-Authenticate": "Bearer", **_CLOSE})


class BodyBudget:
    """ASGI middleware: the bytes of request bodies being read into memory at once, over every request of this
    process, within `limit` (503 with Retry-After past it, by Content-Length before the body is read, or as a
    chunked body grows). The upload routes stream to files and are held to their slots instead."""

    def __init__(self, app: ASGIApp, *, limit: int, streamed: Iterable[str]) -> None:
        self.app = app
        self.limit = limit
        self.streamed = frozenset(streamed)
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.streamed or not _carries_body(scope):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        held = int(declared) if declared.isdigit() else 0
        if self.in_flight + held > self.limit:
            await self._full(scope, send)
            return
        self.in_flight += held
        counted = held
        over = started = False

        async def counting() -> Message:
            # A chunked body is counted as it arrives (a declared one is held whole from the start).
            nonlocal counted, over
            message = await receive()
            if not held and message["type"] == "http.request":
                size = len(message.get("body", b""))
                if self.in_flight + size > self.limit:
                    over = True
                    return {"type": "http.disconnect"}
                self.in_flight += size
                counted += size
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, watched)
        finally:
            self.in_flight -= counted
        if over and not started:
            await self._full(scope, send)

    async def _full(self, scope: Scope, send: Send) -> None:
        detail = f"the desk is reading {self.limit:,} bytes of request bodies already; try again shortly"
        await refuse(scope, send, 503, detail, headers={"Retry-After": "2", **_CLOSE})


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """The methods some route takes at the request's path (GET brings HEAD; OPTIONS is always answered), found by
    asking each route whether it would take the path with that method (FastAPI's included routers keep their own
    routes, so the routes' paths cannot simply be listed)."""
    found = [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in routes)
    ]
    if "GET" in found:
        found.append("HEAD")
    return sorted({*found, "OPTIONS"}) if found else []


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class HeadAndOptions:
    """HEAD answered as GET without the body (a load balancer's health check sends HEAD), OPTIONS with the
    methods the path takes in `Allow` (and no CORS grant: this server never allows another site's scripts)."""

    def __init__(self, app: ASGIApp, *, routes: Callable[[], Iterable[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        if scope["type"] != "http" or method not in ("HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if method == "OPTIONS":
            allowed = allowed_methods(self.routes(), scope)
            if not allowed:
                await self.app(scope, receive, send)  # 404, as for any other method
                return
            headers = [(b"allow", ", ".join(allowed).encode()), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        # HEAD is GET without the body, whatever GET answers (a path without GET: its 405 or 404): no route lookup
        # of our own on the path a load balancer's check takes every few seconds

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        as_get = {**scope, "method": "GET"}
        await self.app(as_get, receive, headers_only)
        for key in ("route", "router"):  # the route that answered, for the request metrics outside
            if key in as_get:
                scope[key] = as_get[key]
