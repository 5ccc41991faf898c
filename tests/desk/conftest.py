"""Fixtures the desk's tests share: one throwaway PostgreSQL server for the session, and per module the scripted
model endpoint (agents say false exactly when the claim names the wrong city)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.support.desk import fake_model, postgres_server, skip_without_postgres
from tests.support.fakes import FakeOpenAI


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    try:
        with postgres_server() as url:
            yield url
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        skip_without_postgres(exc)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    with fake_model() as server:
        yield server
