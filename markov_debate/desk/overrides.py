"""The worker's Verifiers for per-audit overrides: built on first use, sharing the base Verifier's client, and at
most `size` kept; the least recently used one that no audit is running on is closed first, so a stream of
distinct override sets cannot grow the worker's memory without bound."""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from debate.pipeline import Verifier
from markov_debate.desk.requests import AuditOverrides

__all__ = ["OverrideVerifiers"]


class OverrideVerifiers:
    """A bounded (LRU) cache of Verifiers by override set."""

    def __init__(self, base: Verifier, size: int) -> None:
        self._base = base
        self._size = size
        self._kept: OrderedDict[str, Verifier] = OrderedDict()
        self._users: Counter[str] = Counter()
        self._building = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    @asynccontextmanager
    async def lease(self, overrides: AuditOverrides) -> AsyncIterator[Verifier]:
        """The Verifier for `overrides` (the base one when there are none), kept open while the caller uses it.
        Raises pydantic's ValidationError for overrides the configuration refuses."""
        if overrides.is_empty():
            yield self._base
            return
        key = overrides.model_dump_json(exclude_none=True)
        async with self._building:
            verifier = self._kept.get(key)
            if verifier is None:
                config = overrides.apply(self._base.worker_configs(1)[0])
                # Each cascade team on the base's own clients for that team: sharing only the run's team's router
                # would send every later team's turns to the first team's models.
                teams = {
                    step.name: opened.router
                    for step, opened in zip(config.debate.cascade, self._base.runtime.cascade, strict=True)
                }
                verifier = Verifier(
                    config=config,
                    client=self._base.client,
                    cascade_clients=teams,
                    attached_embedded=self._base.embedded,
                )
                await verifier.__aenter__()
                self._kept[key] = verifier
            self._kept.move_to_end(key)
            self._users[key] += 1
            await self._evict()
        try:
            yield verifier
        finally:
            self._users[key] -= 1
            await asyncio.shield(self._evict())

    async def _evict(self) -> None:
        while len(self._kept) > self._size:
            idle = next((k for k in self._kept if self._users[k] == 0), None)
            if idle is None:
                return  # every kept one is running an audit: closed when they finish
            verifier = self._kept.pop(idle)
            del self._users[idle]
            await verifier.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close every kept Verifier (the base one is its owner's to close)."""
        while self._kept:
            _, verifier = self._kept.popitem(last=False)
            await verifier.__aexit__(None, None, None)
        self._users.clear()
