"""Who is asking, and may they: API keys, UI sessions, CSRF tokens, body limits and response headers.

- An API request authenticates with `Authorization: Bearer KEY` (or `X-API-Key`); the UI signs in once with a key
  and then carries a signed session cookie (HttpOnly, SameSite=Strict) naming the key's owner, never the key.
- Without configured keys (loopback only) everyone is `local` with the admin role.
- CSRF: a state-changing request that a browser could send cross-site without asking first (a form, a multipart
  upload, text/plain) or that relies on the session cookie must carry the page's CSRF token; a request whose
  Origin is another site is refused. JSON bodies and key headers cannot be sent cross-site without a preflight,
  which this server never grants.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TypedDict
from urllib.parse import parse_qsl

import anyio.to_thread
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from markov_debate.desk.auth import ApiKey, Permission, Principal, find_key

__all__ = ["LOOPBACK_HOSTS", "AllowedHosts", "BodyLimit", "Guard", "NoNul", "SecurityHeaders", "host_of", "refuse"]

SESSION_COOKIE = "desk_session"
CSRF_COOKIE = "desk_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
_SIMPLE_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
_SESSION_S = 12 * 3600
_SESSION_AAD = b"markov-debate desk session v2"
_LOGIN_FAILURES = 5
"""Failed sign-ins a client may make within `_LOGIN_WINDOW_S` before it has to wait."""
_TRACKED_CLIENTS = 10_000
"""Clients whose failures are remembered at once (a flood of addresses cannot grow the table without bound)."""
_LOGIN_WINDOW_S = 300.0


class FormLimits(TypedDict, total=False):
    max_fields: int
    max_files: int
    max_part_size: int


FORM_LIMITS = FormLimits(max_files=1, max_fields=16, max_part_size=1024 * 1024)
"""What a form may hold, wherever it is parsed: the desk's forms have a few fields and at most one file (a batch
upload), and each file part over 1 MB is a temp file holding a handle until the request ends."""


class Guard:
    """Authentication and CSRF for one app."""

    def __init__(
        self, keys: list[ApiKey], secret: str | None, *, revoked: Callable[[str], bool] = lambda _sid: False
    ) -> None:
        self.keys = keys
        self._secret = (secret or secrets.token_hex(32)).encode()
        # Its own key, derived from the secret: the CSRF tokens' HMAC key never encrypts.
        self._sealer = AESGCM(hashlib.sha256(b"desk-session-seal|" + self._secret).digest())
        self._revoked = revoked
        """Whether a session id was ended by logout (the store answers, for every server sharing it)."""
        self._failed_logins: dict[str, deque[float]] = {}

    @property
    def open(self) -> bool:
        """No keys: the desk is open to whoever reaches it (it then binds loopback only)."""
        return not self.keys

    # --- sessions --------------------------------------------------------------------------------------------

    def _sign(self, payload: str) -> str:
        return hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def session_cookie(self, key: ApiKey) -> str:
        """A new session for `key`'s owner, sealed with AES-GCM: whoever holds the cookie can neither read its
        owner, role, expiry or key fingerprint nor change them."""
        session_id = secrets.token_hex(16)
        payload = f"{key.name}|{key.role}|{int(time.time()) + _SESSION_S}|{key.sha256[:16]}|{session_id}"
        nonce = secrets.token_bytes(12)
        sealed = self._sealer.encrypt(nonce, payload.encode(), _SESSION_AAD)
        return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def _opened(self, cookie: str) -> list[str] | None:
        """The fields of a genuine session cookie (name, role, expiry, key fingerprint, session id); None else."""
        try:
            raw = base64.urlsafe_b64decode(cookie.encode("ascii") + b"=" * (-len(cookie) % 4))
            fields = self._sealer.decrypt(raw[:12], raw[12:], _SESSION_AAD).decode().split("|")
        except (ValueError, UnicodeError, InvalidTag):
            return None
        if len(fields) != 5 or not fields[2].isdigit() or not fields[4]:
            return None
        return fields

    def session_of(self, cookie: str) -> tuple[str, int] | None:
        """(session id, expiry as a Unix time) of a genuine session cookie; None for anything else."""
        fields = self._opened(cookie)
        return (fields[4], int(fields[2])) if fields is not None else None

    def _from_session(self, cookie: str) -> Principal | None:
        fields = self._opened(cookie)
        if fields is None or int(fields[2]) < time.time() or self._revoked(fields[4]):
            return None
        name, role, _expires, key_prefix, _sid = fields
        # A key removed from the configuration ends its sessions too.
        key = next((k for k in self.keys if k.name == name and k.sha256.startswith(key_prefix) and key_prefix), None)
        return Principal(name=key.name, role=key.role) if key is not None and key.role == role else None

    def login(self, presented: str, client: str) -> ApiKey | None:
        """The key presented at the login form, or None; a client with too many recent failures gets 429 first,
        so a key cannot be guessed at the rate the server can answer."""
        return self._checked(presented.strip(), client)

    def _checked(self, presented: str, client: str) -> ApiKey | None:
        """The key, counting a wrong one against `client` (the connection's address: X-Forwarded-For counts only
        from a configured proxy); past `_LOGIN_FAILURES` wrong keys within the window, a wrong key is 429. A
        valid key always passes: behind one NAT address, someone else's guessing must not lock out the people
        who have keys (keys are long random strings: the throttle keeps a failing client's logs and CPU down, it
        is not what makes a key hard to guess). The sign-in form and the headers share one count."""
        key = find_key(self.keys, presented)
        if key is not None:
            return key
        now = time.monotonic()
        failures = self._failed_logins.setdefault(client, deque())
        while failures and failures[0] < now - _LOGIN_WINDOW_S:
            failures.popleft()
        if len(failures) >= _LOGIN_FAILURES:
            wait = int(failures[0] + _LOGIN_WINDOW_S - now) + 1
            raise HTTPException(
                429, f"too many failed sign-ins; try again in {wait} s", headers={"Retry-After": str(wait)}
            )
        failures.append(now)
        if len(self._failed_logins) > _TRACKED_CLIENTS:  # bounded: the oldest client's count goes first
            self._failed_logins.pop(next(iter(self._failed_logins)))
        return None

    # --- identification --------------------------------------------------------------------------------------

    def presented_key(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return request.headers.get("x-api-key")

    def principal(self, request: Request) -> Principal | None:
        """Who sent the request; None when it is not authenticated. The gate found it from the headers before the
        body was read (`CallerGate`); a request that did not pass the gate (a test calling a route) is read here."""
        state = request.scope.get("state") or {}
        if "caller" in state:
            found: Principal | None = state["caller"]
            return found
        named, cookie = self._by_headers(request)
        return self._from_session(cookie) if cookie else named

    async def caller(self, scope: Scope) -> Principal | None:
        """Who sent the request, from its headers alone: a key (a wrong one counted against the client, 429 past
        the limit), or a session cookie that is genuine, unexpired and not ended by logout (the store answers in a
        thread: the event loop never waits on it)."""
        named, cookie = self._by_headers(Request(scope))
        return await anyio.to_thread.run_sync(self._from_session, cookie) if cookie else named

    def _by_headers(self, request: Request) -> tuple[Principal | None, str | None]:
        """(whom the open desk or a presented key names, None), or (None, the session cookie left to check)."""
        if self.open:
            return Principal(name="local", role="admin"), None
        presented = self.presented_key(request)
        if presented is not None:
            key = self._checked(presented, request.client.host if request.client else "?")
            return (Principal(name=key.name, role=key.role) if key is not None else None), None
        return None, request.cookies.get(SESSION_COOKIE)

    def require(self, request: Request, permission: Permission) -> Principal:
        principal = self.principal(request)
        if principal is None:
            raise HTTPException(
                401, "an API key is required (Authorization: Bearer KEY)", headers={"WWW-Authenticate": "Bearer"}
            )
        if not principal.may(permission):
            raise HTTPException(403, f"the {principal.role} role may not {permission}")
        request.state.principal = principal
        return principal

    def identity(self, request: Request) -> str:
        """Whose quota a request spends: the caller the gate found (a key's name, a live session's owner), or
        "anonymous" (a logged-out or expired session spends nobody's quota)."""
        principal = self.principal(request)
        return principal.name if principal is not None else "anonymous"

    # --- CSRF ------------------------------------------------------------------------------------------------

    def csrf_token(self, request: Request) -> str:
        """The token the UI puts in its forms, bound to this browser's session (or its CSRF cookie)."""
        return self._sign("csrf:" + self._csrf_anchor(request))

    def _csrf_anchor(self, request: Request) -> str:
        fresh: str = getattr(request.state, "csrf_anchor", "")
        return request.cookies.get(SESSION_COOKIE) or request.cookies.get(CSRF_COOKIE) or fresh

    def check_origin(self, request: Request) -> None:
        """Refuse a request a browser sent from another site (its Origin header says so)."""
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
            raise HTTPException(403, f"cross-site request refused (Origin {origin})")

    async def check_csrf(self, request: Request) -> None:
        self.check_origin(request)
        if self.presented_key(request) is not None:
            return  # a key header is never sent by a browser on its own
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        ambient = SESSION_COOKIE in request.cookies
        if not ambient and content_type not in _SIMPLE_TYPES:
            return
        token = request.headers.get(CSRF_HEADER)
        if token is None and content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.form(**FORM_LIMITS)
            value = form.get(CSRF_FIELD)
            token = value if isinstance(value, str) else None
        anchor = self._csrf_anchor(request)
        if not token or not anchor or not hmac.compare_digest(token, self._sign("csrf:" + anchor)):
            raise HTTPException(403, "missing or invalid CSRF token: reload the page and try again")


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def host_of(header: str) -> str:
    """The host name of a Host header, without its port ("[::1]:8000" -> "::1", "desk.example:80" -> "desk.example")."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class AllowedHosts:
    """400 for a request whose Host is not one of the desk's names. A web page can point a name it controls at
    127.0.0.1 (DNS rebinding) and then talk to a desk on loopback as if it were its own origin; it cannot make the
    browser send one of the desk's names as Host."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(host_of(h) for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_of(header) not in self.allowed:
                await refuse(scope, send, 400, "host: this desk does not answer to that name (see --allowed-host)")
                return
        await self.app(scope, receive, send)


class NoNul:
    """400 for a URL whose path or a query parameter holds a NUL character (`%00`), naming where: PostgreSQL text
    cannot hold one, so it must never reach a query (it would fail there as if the store were down)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            where = _nul_in(scope)
            if where is not None:
                await refuse(scope, send, 400, f"{where}: holds a NUL character (%00), which is not allowed")
                return
        await self.app(scope, receive, send)


async def refuse(scope: Scope, send: Send, status: int, detail: str, headers: Mapping[str, str] | None = None) -> None:
    """An error from a middleware, before the app runs: JSON in the error model's shape, or a short page for a
    browser that asked for one (a form post)."""
    accept = dict(scope.get("headers") or []).get(b"accept", b"")
    if b"text/html" in accept:
        body = f"<!doctype html><title>{status}</title><p>{html.escape(detail)}</p>".encode()
        kind = b"text/html; charset=utf-8"
    else:
        body, kind = json.dumps({"detail": detail}).encode(), b"application/json"
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    fields = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


def _nul_in(scope: Scope) -> str | None:
    if "\x00" in scope.get("path", ""):
        return "path"
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query and "\x00" not in query:
        return None
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return f"query parameter {name.replace(chr(0), '%00')!r}"
    return "query"


class BodyLimit:
    """Refuses bodies above `limit` bytes with 413: by Content-Length up front, and while streaming otherwise."""

    def __init__(self, app: ASGIApp, limit: int, small: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.default = limit
        self.small = dict(small or {})
        """Paths with a lower limit of their own (the sign-in form)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.small.get(scope["path"], self.default)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(scope, send, limit)
            return
        if declared is not None:
            await self.app(scope, receive, send)  # the server stops reading at the declared length
            return
        # No Content-Length (chunked): read up to the limit first, so the refusal is a clean 413 before the app runs.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > limit:
                await _too_large(scope, send, limit)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(scope: Scope, send: Send, limit: int) -> None:
    await refuse(scope, send, 413, f"request body larger than {limit} bytes")


class SecurityHeaders:
    """Headers on every response: no inline script, no framing, no sniffing."""

    HEADERS: tuple[tuple[bytes, bytes], ...] = (
        (
            b"content-security-policy",
            b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
            b"form-action 'self'; base-uri 'none'",
        ),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
        (b"x-frame-options", b"DENY"),
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = self.HEADERS

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        await self.app(scope, receive, with_headers)
