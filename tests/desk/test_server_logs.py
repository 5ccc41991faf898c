"""The servers' log as an operator reads it (docs/desk.md "Logs"): one line a record, `TIME LEVEL LOGGER: MESSAGE`
with a UTC timestamp, or one JSON object a line with --log-format json; the ready line once the server is up;
`debate worker` saying when SIGTERM stops it and when it has stopped."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.desk import served
from tests.support.helpers import cli_env

pytestmark = pytest.mark.slow  # starts processes

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: \S")


def test_the_text_log_is_one_format_and_says_ready_once_up(tmp_path: Path) -> None:
    with served(tmp_path) as (_url, log):
        lines = log.read_text().splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines
    assert any(" INFO markov_debate.ready: audit desk on http://127.0.0.1:" in line for line in lines), lines


def test_the_json_log_is_one_object_a_line(tmp_path: Path) -> None:
    with served(tmp_path, "--log-format", "json", "--verbose") as (url, log):
        import httpx

        httpx.get(url + "/v1/health")  # an access line too (uvicorn's, through the same handler)
        time.sleep(0.3)
        lines = log.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert all(set(r) == {"time", "level", "logger", "message"} for r in records), records
    assert any(r["logger"] == "markov_debate.ready" and r["message"].startswith("audit desk on") for r in records)
    assert any(r["logger"] == "uvicorn.access" and "/v1/health" in r["message"] for r in records), records


def test_a_worker_says_when_sigterm_stops_it(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "debate.cli", "worker", "--db", f"sqlite:///{tmp_path}/w.sqlite"]
    argv += ["--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "m", "--model.max-attempts", "1"]
    worker = subprocess.Popen(argv, env=cli_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stderr is not None
        first = worker.stderr.readline()
        assert LINE.match(first) and " on sqlite:///" in first, first
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert worker.returncode == 143, rest  # drained, then `debate`'s code for "terminated" (its unit's success)
    assert "SIGTERM: stopping" in rest and rest.rstrip().endswith("stopped"), rest
