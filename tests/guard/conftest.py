"""The guard on 127.0.0.1 (uvicorn in a thread, its lifespan run), in front of a scripted upstream, judged by a
scripted judge: the caller is the OpenAI Python client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from debate.config import DebateConfig, ModelConfig, PrefilterConfig, VerifierConfig
from markov_debate.desk.store import Store
from markov_debate.guard.app import create_app, server_config
from markov_debate.guard.settings import GuardSettings

SOURCES = {"doc1": "Paris is the capital of France.", "doc2": "The Seine flows through Paris."}
GOOD = "Paris is the capital of France [doc1]. The Seine flows through Paris [doc2]."
BAD_CITATION = "Paris is the capital of France [doc1]. The Seine flows through Lyon [doc9]."


class GuardServer:
    """The guard app served on a free loopback port; `close` runs its shutdown (the decisions are flushed)."""

    def __init__(self, settings: GuardSettings) -> None:
        self.settings = settings
        app = create_app(settings, store=Store(settings.db_url))
        # Served as `debate guard` serves it (its HTTP parser and limits), on a free port.
        self._server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> GuardServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the guard did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


def judge_config(base_url: str, *, prefilters: list[str] | None = None, **fields: Any) -> VerifierConfig:
    """The judge: the scripted endpoint, the citation rules, and the initial agent only (one call per claim)."""
    return VerifierConfig(
        model=ModelConfig(base_url=base_url, model="fake-model", max_attempts=1, timeout_s=5),
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(prefilters=prefilters if prefilters is not None else ["rules"]),
        **fields,
    )


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'desk.sqlite'}"


@pytest.fixture
def guard_for(db_url: str) -> Iterator[Any]:
    """guard_for(upstream_url, judge_url, **settings) -> a started GuardServer (closed after the test)."""
    started: list[GuardServer] = []

    def start(upstream: str, judge: str, *, verifier: VerifierConfig | None = None, **fields: Any) -> GuardServer:
        settings = GuardSettings(upstream=upstream, db_url=db_url, verifier=verifier or judge_config(judge), **fields)
        server = GuardServer(settings).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__()
