"""The worker's per-override Verifiers are a bounded LRU: distinct override sets beyond the bound close the least
recently used idle one, never one an audit is running on; and over real HTTP a stream of distinct overrides
leaves the worker with at most that many."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from debate import Verifier
from debate.testing import ScriptedChatClient
from markov_debate.desk.overrides import OverrideVerifiers
from markov_debate.desk.requests import AuditOverrides
from tests.support.desk import ThreadedDesk, settings_for, wait_done
from tests.support.fakes import FakeOpenAI

AUDIT = {
    "question": "What is the capital of France?",
    "reference": "Paris is the capital of France.",
    "response": "The capital of France is Paris.",
}


def test_the_least_recently_used_idle_verifier_is_closed_first(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[int] = []
    original = Verifier.__aexit__

    async def closing(self: Verifier, *exc: Any) -> None:
        closed.append(self.config.debate.max_rounds)
        await original(self, *exc)

    monkeypatch.setattr(Verifier, "__aexit__", closing)

    async def scenario() -> None:
        async with Verifier(client=ScriptedChatClient([])) as base:
            cache = OverrideVerifiers(base, size=2)
            rounds = [AuditOverrides(max_rounds=n) for n in (3, 4, 5)]
            async with cache.lease(AuditOverrides()) as plain:
                assert plain is base and len(cache) == 0  # no overrides: the base Verifier, nothing kept
            async with cache.lease(rounds[0]) as one:
                assert one.config.debate.max_rounds == 3
            async with cache.lease(rounds[1]):
                pass
            async with cache.lease(rounds[0]) as again:
                assert again is one  # kept, and now the most recently used
            async with cache.lease(rounds[2]):
                assert len(cache) == 2 and closed == [4]  # 4 was the least recently used
            # one in use is never closed, even past the bound; it goes once its audit is done
            async with cache.lease(rounds[0]), cache.lease(rounds[1]), cache.lease(rounds[2]):
                assert len(cache) == 3
            assert len(cache) == 2
            await cache.aclose()
            assert len(cache) == 0 and sorted(closed) == [3, 4, 4, 5, 5]

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_stream_of_distinct_overrides_keeps_a_bounded_number(tmp_path: Path, model: FakeOpenAI) -> None:
    settings = settings_for(f"sqlite:///{tmp_path}/v.sqlite", model.base_url, max_override_verifiers=3)
    with ThreadedDesk(settings) as desk:
        client = desk.client()
        ids = [
            client.post("/v1/audits", json={**AUDIT, "overrides": {"max_rounds": n}}).json()["id"] for n in range(3, 13)
        ]
        assert all(wait_done(client, i)["status"] == "done" for i in ids)
        assert len(desk.app.state.worker._overrides) <= 3
