"""The desk's HTTP server against clients that connect and send nothing (or half a request): a deadline for the
request line and headers, a cap on open connections sized to the process's open-file limit, and accept errors logged
once per interval instead of once per attempt. uvicorn has no header-read timeout and counts an idle connection
only when a request arrives, so a few thousand silent sockets would exhaust the file limit and stall every route."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ACCEPT_BACKLOG", "Every", "ServerLimits", "guarded_protocol", "limit_accept_errors", "server_limits"]

log = logging.getLogger("markov_debate.desk.serving")

ACCEPT_BACKLOG = 128
"""The listen backlog: asyncio accepts up to this many sockets per wake-up before any of them is seen by the
protocol (where the cap is enforced), so the cap leaves room for two such batches."""
RESERVED_FILES = 96 + 2 * ACCEPT_BACKLOG
"""Files kept for everything but settled client connections: the store's pool, logs, the model endpoint's
connections, and sockets accepted but not yet counted."""


@dataclass(frozen=True)
class ServerLimits:
    """What the server allows: open client connections, and seconds to send a request's line and headers."""

    connections: int
    header_timeout_s: float
    file_limit: int

    def describe(self) -> str:
        return (
            f"at most {self.connections} connections (open-file limit {self.file_limit}), "
            f"{self.header_timeout_s:g} s to send a request's headers"
        )


def server_limits(*, max_connections: int | None, header_timeout_s: float) -> ServerLimits:
    """The limits for this process: the open-file soft limit is raised to the hard one where allowed, and the
    connection cap leaves RESERVED_FILES of it for everything else (or `max_connections` when lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if wanted > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # a container may refuse; the cap follows the limit we have
            log.info("could not raise the open-file limit above %d", soft)
    cap = max(8, soft - RESERVED_FILES)
    if max_connections is not None:
        cap = min(cap, max_connections)
    return ServerLimits(cap, header_timeout_s, soft)


class _GuardedH11(H11Protocol):
    limits: ClassVar[ServerLimits]
    refused: ClassVar[int] = 0
    _refused_logged: ClassVar[float] = 0.0

    _deadline: asyncio.TimerHandle | None = None
    _turned_away = False

    _opened = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.connections and not self._evict_idle():
            # Every connection is busy with a request: this one is closed at once, so a flood never holds more
            # files than the cap.
            self._turned_away = True
            transport.abort()
            type(self)._note_refusal()
            return
        super().connection_made(transport)
        self._opened = time.monotonic()
        self._deadline = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _idle(self) -> bool:
        """Connected, and no request in progress (none sent yet, or between keep-alive requests)."""
        return (
            self.transport is not None
            and not self.transport.is_closing()
            and (self.cycle is None or self.cycle.response_complete)
        )

    def _evict_idle(self) -> bool:
        """At the cap, the longest-idle connection makes room: a client that connects and sends its request at once
        (health checks, the API, the UI) is served while silent sockets hold the rest."""
        idle = [p for p in self.connections if isinstance(p, _GuardedH11) and p._idle()]
        if not idle:
            return False
        oldest = min(idle, key=lambda p: p._opened)
        oldest.transport.abort()
        type(self)._note_refusal()
        return True

    @classmethod
    def _note_refusal(cls) -> None:
        cls.refused += 1
        now = time.monotonic()
        if now - cls._refused_logged >= 30:
            cls._refused_logged = now
            log.warning(
                "connection cap of %d reached: %d idle or surplus connection(s) closed so far",
                cls.limits.connections,
                cls.refused,
            )

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._deadline is not None and self.cycle is not None:
            self._deadline.cancel()  # the headers are in; the app's own limits take over
            self._deadline = None

    def _headers_too_slow(self) -> None:
        self._deadline = None
        if self.cycle is None and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._turned_away:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)


def guarded_protocol(limits: ServerLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the limits (pass it as `http=`)."""
    return type("GuardedH11Protocol", (_GuardedH11,), {"limits": limits, "refused": 0})


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
