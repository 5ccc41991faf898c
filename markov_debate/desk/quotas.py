"""What one key may take of the desk: submissions a minute, uploads read at once (per key and in all), and audits
waiting or running. Each refusal is a 429 with Retry-After, given before the request's body is read (an upload
refused here never holds a spooled file), so one script cannot fill the queue, the disk or the file table for
everyone else.

The rate and the upload slots are counted in this process (a desk of several server processes behind one address
allows each of them the rate); the waiting audits are counted in the store, so every process sees the same number.
"""

from __future__ import annotations

import math
import time
from collections import Counter

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from markov_debate.desk.security import Guard, refuse
from markov_debate.desk.settings import DeskSettings

__all__ = ["SUBMITTING", "UPLOADING", "Quotas"]

SUBMITTING = frozenset({"/v1/audits", "/v1/batches", "/submit", "/batches"})
"""POST routes that queue audits: each request spends one of its key's submissions a minute."""
UPLOADING = frozenset({"/v1/batches", "/batches"})
"""POST routes whose body is an upload (spooled to a file while it is read): each holds an upload slot."""


class Quotas:
    """ASGI middleware: the per-key submission rate and the upload slots, checked from the request's headers."""

    def __init__(self, app: ASGIApp, *, settings: DeskSettings, guard: Guard) -> None:
        self.app = app
        self.guard = guard
        self.uploads_in_all = settings.max_uploads
        self.uploads_per_key = settings.max_uploads_per_key
        self.rate = RateLimitItemPerMinute(settings.key_submits_per_minute)
        self.limiter = MovingWindowRateLimiter(MemoryStorage())
        self.uploading: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in SUBMITTING:
            await self.app(scope, receive, send)
            return
        who = self.guard.identity(Request(scope))
        refusal = self._over_rate(who) or (self._no_upload_slot(who) if scope["path"] in UPLOADING else None)
        if refusal is not None:
            message, wait = refusal
            await refuse(scope, send, 429, message, headers={"Retry-After": str(wait)})
            return
        if scope["path"] not in UPLOADING:
            await self.app(scope, receive, send)
            return
        self.uploading[who] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.uploading[who] -= 1
            if not self.uploading[who]:
                del self.uploading[who]

    def _over_rate(self, who: str) -> tuple[str, int] | None:
        if self.limiter.hit(self.rate, who):
            return None
        reset = self.limiter.get_window_stats(self.rate, who).reset_time
        wait = max(1, math.ceil(reset - time.time()))
        return f"{who}: more than {self.rate.amount} submissions a minute; try again in {wait} s", wait

    def _no_upload_slot(self, who: str) -> tuple[str, int] | None:
        if self.uploading[who] >= self.uploads_per_key:
            return f"{who}: {self.uploading[who]} upload(s) already being read (at most {self.uploads_per_key})", 5
        if self.uploading.total() >= self.uploads_in_all:
            return f"the desk is reading {self.uploads_in_all} uploads already; try again shortly", 5
        return None
