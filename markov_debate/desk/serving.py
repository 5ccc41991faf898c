"""The desk's HTTP server against clients that connect and send nothing, half a request or a body a byte at a time:
a deadline for every request's line and headers, a minimum rate and a total time for its body, a cap on open
connections sized to the process's open-file limit (at the cap the longest-idle connection, or else the slowest
sender, makes room), and accept errors and malformed requests logged once per interval instead of once each.
uvicorn has no header or body deadline, so a few thousand silent or trickling sockets would exhaust the file limit
and stall every route."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "ACCEPT_BACKLOG",
    "Every",
    "ServerLimits",
    "guarded_protocol",
    "limit_accept_errors",
    "limit_invalid_request_logs",
    "server_limits",
]

log = logging.getLogger("markov_debate.desk.serving")

ACCEPT_BACKLOG = 128
"""The listen backlog: asyncio accepts up to this many sockets per wake-up before any of them is seen by the
protocol (where the cap is enforced), so the cap leaves room for two such batches."""
RESERVED_FILES = 96 + 2 * ACCEPT_BACKLOG
"""Files kept for everything but settled client connections: the store's pool, logs, the model endpoint's
connections, and sockets accepted but not yet counted."""


@dataclass(frozen=True)
class ServerLimits:
    """What the server allows: open client connections, seconds to send a request's line and headers, and how slowly
    and for how long a request body may arrive."""

    connections: int
    header_timeout_s: float
    file_limit: int
    body_min_rate: float = 1024.0
    """Bytes a second a request body must average over each BODY_WINDOW_S while the server is reading it."""
    body_timeout_s: float = 300.0
    """Seconds the server spends reading one request body at most."""
    header_bytes: int = 65536
    """Bytes of a request's line and headers at most: past them the request is answered 431 and its connection
    closed (httptools' parser, which the guard serves with, keeps every header byte it is sent)."""

    def describe(self) -> str:
        return (
            f"at most {self.connections} connections (open-file limit {self.file_limit}), "
            f"{self.header_timeout_s:g} s and {self.header_bytes // 1024} KiB for a request's headers, request bodies "
            f"at {self.body_min_rate:g} B/s or more and within {self.body_timeout_s:g} s"
        )


BODY_WINDOW_S = 10
"""The window over which a body's rate is judged: a pause of a few seconds (a phone changing cells) is allowed, a
trickle of a byte every few seconds is not."""


def server_limits(
    *,
    max_connections: int | None,
    header_timeout_s: float,
    body_min_rate: float = 1024.0,
    body_timeout_s: float = 300.0,
    reserved_files: int = 0,
) -> ServerLimits:
    """The limits for this process: the open-file soft limit is raised to the hard one where allowed, and the
    connection cap leaves RESERVED_FILES of it for everything else, plus `reserved_files` (the uploads being read,
    each a spooled file), or is `max_connections` when lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if wanted > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # a container may refuse; the cap follows the limit we have
            log.info("could not raise the open-file limit above %d", soft)
    cap = max(8, soft - RESERVED_FILES - reserved_files)
    if max_connections is not None:
        cap = min(cap, max_connections)
    return ServerLimits(cap, header_timeout_s, soft, body_min_rate, body_timeout_s)


class _Cycle:
    """What the limits read of uvicorn's request-response cycle (the same in both of its HTTP/1.1 protocols)."""

    more_body: bool
    response_complete: bool


class _Uvicorn(asyncio.Protocol):
    """What the limits use of a uvicorn HTTP/1.1 protocol; the real methods come from the protocol class after it in
    the MRO (`_Guarded` is mixed in before H11Protocol or HttpToolsProtocol)."""

    connections: set[Any]
    cycle: _Cycle | None
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    flow: FlowControl

    if TYPE_CHECKING:

        def on_response_complete(self) -> None: ...


class _Guarded(_Uvicorn):
    """A uvicorn HTTP/1.1 protocol (h11's or httptools') with deadlines for every phase a client controls: the
    request line and headers (of every request on the connection, not only the first), and the body (a minimum
    rate and a total time). uvicorn has neither, so a connection mid-body that sends a byte every few seconds is
    never idle and never closed."""

    limits: ClassVar[ServerLimits]
    refused: ClassVar[int] = 0
    _refused_logged: ClassVar[float] = 0.0
    _slow_bodies: ClassVar[Every]

    _deadline: asyncio.TimerHandle | None = None
    _turned_away = False
    _opened = 0.0
    _request: object | None = None  # the cycle whose headers are in (a new cycle means a new request arrived)
    _body: _BodyWatch | None = None
    _header_bytes = 0  # bytes of the request line and headers so far, while they are still coming

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.connections and not self._make_room():
            # Every connection is sending its body at a fair rate or waiting on the app: this one is closed at
            # once, so a flood never holds more files than the cap.
            self._turned_away = True
            transport.abort()
            type(self)._note_refusal()
            return
        super().connection_made(transport)
        self._opened = time.monotonic()
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _idle(self) -> bool:
        """Connected, and no request in progress (none sent yet, or between keep-alive requests)."""
        return (
            self.transport is not None
            and not self.transport.is_closing()
            and (self.cycle is None or self.cycle.response_complete)
        )

    def _make_room(self) -> bool:
        """At the cap, the longest-idle connection makes room, or else the one sending its body slowest: a client
        that connects and sends its request at once (health checks, the API, the UI) is served while silent or
        trickling sockets hold the rest."""
        others = [p for p in self.connections if isinstance(p, _Guarded) and p.transport is not None]
        idle = [p for p in others if p._idle()]
        if idle:
            victim = min(idle, key=lambda p: p._opened)
        else:
            sending = [p for p in others if p._body is not None and not p.transport.is_closing()]
            if not sending:
                return False
            victim = min(sending, key=lambda p: p._body.rate() if p._body is not None else 0.0)
        victim.transport.abort()
        type(self)._note_refusal()
        return True

    @classmethod
    def _note_refusal(cls) -> None:
        cls.refused += 1
        now = time.monotonic()
        if now - cls._refused_logged >= 30:
            cls._refused_logged = now
            log.warning(
                "connection cap of %d reached: %d idle, slow or surplus connection(s) closed so far",
                cls.limits.connections,
                cls.refused,
            )

    def data_received(self, data: bytes) -> None:
        if self._body is not None:
            self._body.received += len(data)
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and cycle is not self._request:
            self._request = cycle  # a request's headers are in: the header deadline is met
            self._header_bytes = 0
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if cycle.more_body and not cycle.response_complete:
                self._body = _BodyWatch(self)
        elif self._awaiting_headers():
            self._header_bytes += len(data)
            if self._header_bytes > self.limits.header_bytes:
                self._headers_too_large()

    def _awaiting_headers(self) -> bool:
        """No request in progress: what comes is the next request's line and headers."""
        cycle = self.cycle
        return cycle is None or (cycle is self._request and cycle.response_complete)

    def _headers_too_large(self) -> None:
        # answered without the app, which never sees this request: at most `header_bytes` (and a read's worth)
        # were held for it
        self._header_bytes = 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\nconnection: close\r\n"
                b"content-length: 44\r\n\r\nrequest line and headers over the size limit"
            )
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._body = None
        self._header_bytes = 0
        if not self.transport.is_closing():
            # the next request on this connection gets the same deadline for its headers as the first did (the
            # keep-alive timer stops at its first byte)
            self._arm_header_deadline()

    def _headers_too_slow(self) -> None:
        self._deadline = None
        if self._awaiting_headers() and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _close_slow_body(self, why: str) -> None:
        self._body = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        count = self._slow_bodies.due()
        if count is not None:
            log.warning("closed %d connection(s) whose request body came too slowly (latest: %s)", count, why)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._turned_away:
            return
        self._body = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)


class _BodyWatch:
    """The body of the request a connection is sending: checked each second while the server is reading it (not
    while uvicorn has paused reading because the app has not taken what came, which is no fault of the client)."""

    def __init__(self, protocol: _Guarded) -> None:
        self.protocol = protocol
        self.received = 0
        self.reading_s = 0
        self._window_bytes = 0
        self._window_s = 0
        protocol.loop.call_later(1.0, self._tick)

    def rate(self) -> float:
        """Bytes a second so far (reading time only)."""
        return self.received / max(1, self.reading_s)

    def _tick(self) -> None:
        protocol = self.protocol
        cycle = protocol.cycle
        if protocol._body is not self or cycle is None or not cycle.more_body or cycle.response_complete:
            return  # the body is in, the app answered, or the connection is gone
        if not protocol.flow.read_paused:
            limits = protocol.limits
            self.reading_s += 1
            self._window_s += 1
            if self.reading_s > limits.body_timeout_s:
                protocol._close_slow_body(f"still sending after {limits.body_timeout_s:g} s")
                return
            if self._window_s >= BODY_WINDOW_S:
                came = self.received - self._window_bytes
                if came < limits.body_min_rate * self._window_s:
                    protocol._close_slow_body(f"{came} bytes in {self._window_s} s")
                    return
                self._window_bytes, self._window_s = self.received, 0
        protocol.loop.call_later(1.0, self._tick)


def guarded_protocol(limits: ServerLimits, http: Literal["h11", "httptools"] = "h11") -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol with the limits (pass it as `http=`): h11's (pure Python), or httptools' (a C
    parser, which the `desk` extra installs; the guard serves with it)."""
    attributes = {"limits": limits, "refused": 0, "_slow_bodies": Every()}
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return type("GuardedHttpToolsProtocol", (_Guarded, HttpToolsProtocol), attributes)
    return type("GuardedH11Protocol", (_Guarded, H11Protocol), attributes)


_RESOURCE_MESSAGE = "socket.accept() out of system resource"


class Every:
    """Counts an event and says when to report it: at most once per `interval_s`, with the count since the last
    report (a flood of one failure is one log line a while, not a line or a traceback each)."""

    def __init__(self, interval_s: float = 30.0) -> None:
        self.interval_s = interval_s
        self._last = -interval_s
        self._count = 0

    def due(self) -> int | None:
        """Count one; the count to report (this one included) when a report is due, else None."""
        self._count += 1
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return None
        self._last, count, self._count = now, self._count, 0
        return count


def limit_accept_errors(loop: asyncio.AbstractEventLoop, interval_s: float = 30.0) -> None:
    """Log asyncio's "out of system resource" accept error once per `interval_s` with the count since, instead of
    once (with a traceback) per attempt; every other error goes to the handler that was there."""
    previous = loop.get_exception_handler()
    every = Every(interval_s)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith(_RESOURCE_MESSAGE):
            count = every.due()
            if count is not None:
                log.error(
                    "%s: %s (%d time(s) since the last report)", _RESOURCE_MESSAGE, context.get("exception"), count
                )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class _OneLineAWhile(logging.Filter):
    """Lets a flood of one warning through once per interval, with the count since."""

    def __init__(self, message: str | None, interval_s: float, *, what: str = "") -> None:
        super().__init__()
        self.message = message
        """The warning limited; None: every record of the logger (its texts vary, its cause is one)."""
        self.what = what
        self.every = Every(interval_s)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.message is not None and record.msg != self.message:
            return True
        count = self.every.due()
        if count is None:
            return False
        if self.message is None:
            record.msg, record.args = (
                f"{self.what} (the last: %s; {count} time(s) since the last report)",
                (record.getMessage(),),
            )
        else:
            record.msg = f"{self.message} ({count} time(s) since the last report)"
        return True


def limit_invalid_request_logs(interval_s: float = 30.0) -> None:
    """uvicorn's "Invalid HTTP request received." once per `interval_s` with the count since: each malformed request
    otherwise writes a line, which a client can send thousands of a second."""
    logging.getLogger("uvicorn.error").addFilter(_OneLineAWhile("Invalid HTTP request received.", interval_s))
    # python-multipart warns once per malformed part, on a body the caller sent: one line a while, the last named
    multipart = _OneLineAWhile(None, interval_s, what="malformed multipart bodies")
    for name in ("python_multipart.multipart", "multipart.multipart"):
        logging.getLogger(name).addFilter(multipart)
