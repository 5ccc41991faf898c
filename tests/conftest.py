"""Fixtures every test folder shares; helpers are in tests.support."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Generated-input tests: "ci" (the default) keeps the suite inside CI's time; `pytest --hypothesis-profile long`
# runs 20 times as many examples locally.
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[str]:
    """One real llama.cpp server with the embedded SmolLM2 model for the whole session."""
    from debate.llm._embedded import EmbeddedServer

    with EmbeddedServer() as server:
        yield server.base_url


@pytest.fixture
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL"):
        monkeypatch.delenv(name, raising=False)


os.environ.setdefault("NO_COLOR", "1")
