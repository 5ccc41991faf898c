"""Fixtures the desk's tests share: one throwaway PostgreSQL server for the session, and per module the scripted
model endpoint (agents say false exactly when the claim names the wrong city)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.desk import fake_model, postgres_server
from tests.support.fakes import FakeOpenAI


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    try:
        with postgres_server() as url:
            yield url
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        if os.environ.get("DEBATE_REQUIRE_POSTGRES"):
            raise
        detail = exc.stderr if isinstance(exc, subprocess.CalledProcessError) else exc
        pytest.skip(f"no PostgreSQL server could be started here ({detail}); CI installs one")


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    with fake_model() as server:
        yield server
