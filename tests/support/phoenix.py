"""A real Phoenix server (arize-phoenix) on 127.0.0.1 for the tracing tests, and a reader of its REST API."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def need(module: str) -> None:
    """Skip without `module`, except in CI (DEBATE_REQUIRE_INTEGRATIONS=1), where its absence fails."""
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("DEBATE_REQUIRE_INTEGRATIONS") == "1":
            pytest.fail(f"{module} is required here (DEBATE_REQUIRE_INTEGRATIONS=1) but not installed")
        pytest.skip(f"{module} is not installed")


class Phoenix:
    """A started Phoenix: its base URL and its spans and annotations, read back by REST."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=30)

    def spans(self, project: str, *, at_least: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        """The project's spans, waiting (Phoenix ingests asynchronously, in batches) until there are `at_least` and
        their number has stopped growing for a second (a run's spans all arrive together, but a query can land
        between two of Phoenix's inserts and see part of them)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        settled: int | None = None
        while time.monotonic() < deadline:
            answer = self.client.get(f"/v1/projects/{project}/spans", params={"limit": 1000})
            if answer.status_code == 200:
                found = answer.json()["data"]
                if len(found) >= at_least:
                    if len(found) == settled:
                        return found
                    settled = len(found)
                    time.sleep(1.0)
                    continue
            time.sleep(0.3)
        raise AssertionError(f"Phoenix has {len(found)} span(s) in {project}, expected at least {at_least}")

    def annotations(self, project: str, span_ids: list[str]) -> list[dict[str, Any]]:
        answer = self.client.get(
            f"/v1/projects/{project}/span_annotations", params={"span_ids": span_ids, "limit": 1000}
        )
        answer.raise_for_status()
        data: list[dict[str, Any]] = answer.json()["data"]
        return data


def start_phoenix(workdir: Path) -> Generator[Phoenix, None, None]:
    need("phoenix")
    need("opentelemetry.sdk")
    port, grpc = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    executable = shutil.which("phoenix") or "phoenix"
    log = (workdir / "phoenix.log").open("w")
    process = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass  # not listening yet
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Phoenix did not start: {(workdir / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield Phoenix(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
