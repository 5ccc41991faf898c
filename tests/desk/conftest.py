"""Fixtures the desk's tests share: one throwaway PostgreSQL server for the session."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.desk import postgres_server


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
