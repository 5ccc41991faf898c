"""Requests-per-minute and tokens-per-minute limits on model calls, shared by every worker process of a run, and
the server's own word on its limits (Retry-After, `x-ratelimit-*`) honoured by all of them.

Each limit is a GCRA (generic cell rate algorithm) schedule: a call reserves its place under a lock (requests one
each, tokens as estimated: the prompt's characters / 4 plus the completion limit, settled to the actual usage
afterwards) and sleeps outside it until its place comes, so waiting holds no lock and no model slot. The schedule
lives in shared memory made by the parent of a `--workers` run and handed to each worker (debate.workers), so N
processes together keep the one limit. A 429 or an exhausted `x-ratelimit-remaining-*` pauses every process until
the reset the server gave.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["RateLimiter", "SharedRates", "adopt_shared", "reset_seconds", "shared_rates"]

_REQUESTS, _TOKENS, _PAUSED = 0, 1, 2
_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class SharedRates:
    """The schedule's three clocks (next request, next token, paused until), in time.monotonic() seconds, which
    every process of one machine shares. Picklable to a spawned worker as a Process argument."""

    def __init__(self, values: Any, lock: Any) -> None:
        self.values = values
        self.lock = lock

    @classmethod
    def local(cls) -> SharedRates:
        """For one process."""
        return cls([0.0, 0.0, 0.0], threading.Lock())

    @classmethod
    def for_processes(cls, context: Any) -> SharedRates:
        """In shared memory, for the processes of `context` (a multiprocessing context): ENDPOINT_SLOTS schedules,
        one per endpoint of the run (a team with a model per role has several)."""
        return cls(context.RawArray("d", 3 * ENDPOINT_SLOTS), context.Lock())

    def slot(self, endpoint: str) -> SharedRates:
        """The schedule of `endpoint` among a process-shared block's slots (by a digest of its name, so every
        process picks the same one; two endpoints that share a slot keep one schedule, slower, never faster)."""
        index = int.from_bytes(hashlib.sha256(endpoint.encode()).digest()[:4], "big") % ENDPOINT_SLOTS
        return SharedRates(_Offset(self.values, 3 * index), self.lock)


ENDPOINT_SLOTS = 16
"""Endpoints a `--workers` run's shared schedules tell apart."""


class _Offset:
    """Three clocks inside a larger shared array."""

    def __init__(self, values: Any, start: int) -> None:
        self._values = values
        self._start = start

    def __getitem__(self, index: int) -> float:
        return float(self._values[self._start + index])

    def __setitem__(self, index: int, value: float) -> None:
        self._values[self._start + index] = value


_ADOPTED: SharedRates | None = None
_LOCAL: dict[str, SharedRates] = {}


def adopt_shared(rates: SharedRates | None) -> None:
    """This process's limiters use `rates` (a worker of a `--workers` run, given its parent's); None: their own."""
    global _ADOPTED
    _ADOPTED = rates


def shared_rates(endpoint: str) -> SharedRates:
    """The schedule of `endpoint`'s limiters in this process: its parent's slot for it (a worker's), else this
    process's own for that endpoint."""
    if _ADOPTED is not None:
        return _ADOPTED.slot(endpoint)
    return _LOCAL.setdefault(endpoint, SharedRates.local())


def reset_seconds(value: str) -> float | None:
    """OpenAI's `x-ratelimit-reset-*` durations ("1s", "6m0s", "20ms", "0.5s"), or plain seconds."""
    try:
        return max(0.0, float(value))
    except ValueError:
        parts = list(_DURATION.finditer(value))
        if not parts:
            return None
        return sum(float(m["value"]) * _UNIT_S[m["unit"]] for m in parts)


class RateLimiter:
    """model.requests_per_minute / tokens_per_minute for one client, on `shared_rates(endpoint)`: every client of a
    run keeps one schedule."""

    def __init__(self, endpoint: str, *, requests_per_minute: int | None, tokens_per_minute: int | None) -> None:
        self.endpoint = endpoint
        self.request_interval = 60.0 / requests_per_minute if requests_per_minute else None
        self.token_interval = 60.0 / tokens_per_minute if tokens_per_minute else None
        # One second's worth of tokens may go at once (a call larger than that waits its share); requests are
        # spaced evenly.
        self.token_burst = (tokens_per_minute or 0) / 60.0
        self.waited_s = 0.0
        """Seconds this limiter's calls waited for their place (for the logs and the benchmark)."""

    @property
    def active(self) -> bool:
        return self.request_interval is not None or self.token_interval is not None

    def _reserve(self, tokens: int) -> float:
        """Take the next place in the schedule; return the monotonic time it starts."""
        rates = shared_rates(self.endpoint)
        with rates.lock:
            now = time.monotonic()
            start = max(now, rates.values[_PAUSED])
            if self.request_interval is not None:
                start = max(start, rates.values[_REQUESTS])
                rates.values[_REQUESTS] = start + self.request_interval
            if self.token_interval is not None:
                theoretical = max(rates.values[_TOKENS], now) + tokens * self.token_interval
                # A call may go when the schedule, its own tokens included, is no more than one burst (or the call
                # itself, when larger) ahead of now: over any minute at most tokens_per_minute plus one burst go.
                start = max(start, theoretical - max(self.token_burst, tokens) * self.token_interval)
                rates.values[_TOKENS] = theoretical
            return float(start)

    async def acquire(self, tokens: int) -> None:
        """Wait for the place of one request of about `tokens` tokens."""
        if not self.active:
            return
        delay = self._reserve(tokens) - time.monotonic()
        if delay > 0:
            self.waited_s += delay
            await asyncio.sleep(delay)

    def settle(self, reserved: int, used: int) -> None:
        """Give back the tokens reserved but not used (an estimate above the actual usage)."""
        if self.token_interval is None or used >= reserved:
            return
        rates = shared_rates(self.endpoint)
        with rates.lock:
            rates.values[_TOKENS] = max(
                time.monotonic(), rates.values[_TOKENS] - (reserved - used) * self.token_interval
            )

    def pause(self, seconds: float) -> None:
        """The server says wait: no process of the run starts a call for `seconds`."""
        rates = shared_rates(self.endpoint)
        with rates.lock:
            rates.values[_PAUSED] = max(rates.values[_PAUSED], time.monotonic() + seconds)

    def observe(self, headers: Mapping[str, str]) -> None:
        """After any reply: an exhausted `x-ratelimit-remaining-requests/-tokens` pauses until its reset."""
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            reset = headers.get(f"x-ratelimit-reset-{kind}")
            if remaining is not None and reset is not None and remaining.strip() == "0":
                seconds = reset_seconds(reset)
                if seconds is not None:
                    self.pause(seconds)
