"""The model-call cache keys on what determines the answer and keeps only usable replies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.errors import ModelRequestError
from debate.llm._cache import cache_stats, clear_cache
from debate.plugins import TaskInput
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op

QUESTION, ANSWER, KNOWLEDGE = "Capital of France?", "Paris", "Paris is the capital of France."


def _config(server: FakeOpenAI, cache: Path, **model: object) -> VerifierConfig:
    return VerifierConfig(
        model=ModelConfig(base_url=server.base_url, model="fake-model", max_attempts=1, **model),
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        call_cache=str(cache),
    )


async def _verify(config: VerifierConfig) -> str:
    async with Verifier(config=config) as verifier:
        report = await verifier.verify(TaskInput(ANSWER, question=QUESTION, reference=KNOWLEDGE))
    return report.verdict


async def test_another_endpoint_is_not_answered_from_the_first_ones_cache(tmp_path: Path) -> None:
    cache = tmp_path / "calls.sqlite"
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as a:
        assert await _verify(_config(a, cache)) == "factual"
        first_endpoint = a.base_url
    with FakeOpenAI(responder=lambda body: Reply(status=401, error_message="bad key")) as b:
        with pytest.raises(ModelRequestError, match="401"):
            await _verify(_config(b, cache))
        assert len(b.requests) == 1  # B was asked: A's answer was not reported under B's name
    stats = cache_stats(cache)
    assert stats.entries == 1 and list(stats.by_endpoint) == [f"{first_endpoint} fake-model"]


async def test_a_rerun_on_the_same_endpoint_is_served_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "calls.sqlite"
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        await _verify(_config(server, cache))
        await _verify(_config(server, cache))
        assert len(server.requests) == 1


async def test_unusable_replies_are_never_cached(tmp_path: Path) -> None:
    cache = tmp_path / "calls.sqlite"
    with FakeOpenAI([Reply(content="not json at all"), Reply(content=op(False, 4))]) as server:
        assert await _verify(_config(server, cache)) == "non_factual"  # re-asked once, then usable
    assert cache_stats(cache).entries == 1  # the accepted reply only
    # A run whose replies all stay unusable stores nothing: the next run asks the endpoint again.
    other = tmp_path / "other.sqlite"
    with FakeOpenAI([Reply(content="nonsense")] * 3) as server:
        assert await _verify(_config(server, other)) == "unverifiable"
    assert cache_stats(other).entries == 0


async def test_at_temperature_above_zero_each_call_site_is_its_own_sample(tmp_path: Path) -> None:
    """The same request in two rounds are two samples; a re-run replays each round's own sample."""
    cache = tmp_path / "calls.sqlite"
    replies = iter([op(True, 0, f"sample {i}") for i in range(20)])
    with FakeOpenAI(responder=lambda body: Reply(content=next(replies))) as server:
        config = _config(server, cache, temperature=0.7)
        config = config.model_copy(update={"debate": DebateConfig(min_rounds=2, max_rounds=2)})
        async with Verifier(config=config) as verifier:
            first = await verifier.verify(TaskInput(ANSWER, question=QUESTION, reference=KNOWLEDGE))
        calls = len(server.requests)
        async with Verifier(config=config) as verifier:
            second = await verifier.verify(TaskInput(ANSWER, question=QUESTION, reference=KNOWLEDGE))
        assert len(server.requests) == calls == 7  # every turn its own sample, and a re-run made no call
    opinions = [t.opinion for s in first.claims[0].debate.states for t in s.turns]  # type: ignore[union-attr]
    assert len(set(opinions)) == 7
    assert opinions == [t.opinion for s in second.claims[0].debate.states for t in s.turns]  # type: ignore[union-attr]


@pytest.mark.slow
def test_cache_command_and_verify_cache_option(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}

    def debate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, env=env, timeout=120
        )

    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        args = [
            "verify",
            "--question",
            QUESTION,
            "--answer",
            ANSWER,
            "--evidence",
            KNOWLEDGE,
            "--model.base-url",
            server.base_url,
            "--debate.min-rounds",
            "0",
            "--call-cache",
            str(tmp_path / "calls.sqlite"),
            "--json",
        ]
        assert debate(*args).returncode == 0
        assert debate(*args).returncode == 0
        assert len(server.requests) == 1
        uncached = debate(*args[:-3], "--json")  # off by default for verify
        assert uncached.returncode == 0 and len(server.requests) == 2
    stats = debate("cache", "stats", "--cache", str(tmp_path), "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["entries"] == 1
    cleared = debate("cache", "clear", "--cache", str(tmp_path))
    assert cleared.returncode == 0 and "1 cached call" in cleared.stdout
    assert clear_cache(tmp_path / "calls.sqlite") == 0
