from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def op(factual: bool, severity: int = 0, text: str = "reasoning") -> str:
    """A well-formed agent reply in the paper's format."""
    return json.dumps({"opinion": text, "factuality": factual, "Error severity": severity})


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[str]:
    """One real llama.cpp server with the embedded SmolLM2 model for the whole session."""
    from debate.llm.embedded import EmbeddedServer

    with EmbeddedServer() as server:
        yield server.base_url


@pytest.fixture
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL"):
        monkeypatch.delenv(name, raising=False)


ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("NO_COLOR", "1")
