"""Ctrl-C is one line and exit 130 at any moment: start-up, mid-debate, mid-batch (real SIGINT to a real process,
against a slow scripted endpoint on 127.0.0.1). Finished batch records are kept and a re-run resumes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, op, sigint_default
from fakes import FakeOpenAI, Reply

INTERRUPTED = "debate: interrupted; finished records are kept"


def _slow(body: dict[str, Any]) -> Reply:
    return Reply(content=op(True), delay_s=0.4)


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "debate.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=sigint_default,
    )


def _interrupt(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[-1] == INTERRUPTED, err
    for noise in ("Traceback", "ERROR", "CancelledError", "KeyboardInterrupt"):
        assert noise not in err, err
    return err


def _wait(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _items(path: Path, n: int) -> None:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": "Capital of France?",
                    "response": "Paris.",
                    "reference": "Paris is the capital of France.",
                }
            )
            + "\n"
            for i in range(n)
        )
    )


@pytest.mark.parametrize("after_s", [0.3, 0.6])
def test_ctrl_c_during_start_up(after_s: float) -> None:
    """While the engine's modules import, or while argparse, the plugins and the endpoint check run: still one
    line. (A Ctrl-C in CPython's own first milliseconds, before any of our code runs, is CPython's to report.)"""
    proc = subprocess.Popen(
        [
            "debate",
            "verify",
            "--question",
            "Q?",
            "--answer",
            "A",
            "--evidence",
            "E",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=sigint_default,
    )
    time.sleep(after_s)
    if proc.poll() is not None:  # pragma: no cover - a very fast machine finished first
        pytest.skip("the command ended before the signal")
    _interrupt(proc)


def test_ctrl_c_mid_debate() -> None:
    with FakeOpenAI(responder=_slow) as server:
        proc = _start(
            [
                "verify",
                "--question",
                "Capital of France?",
                "--answer",
                "Paris.",
                "--evidence",
                "Paris is the capital of France.",
                "--base-url",
                server.base_url,
                "--model",
                "fake-model",
            ]
        )
        _wait(lambda: len(server.requests) >= 2)  # the initial agent answered, the chain is running
        _interrupt(proc)


def test_ctrl_c_mid_batch_keeps_finished_records_and_resumes(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 12)
    args = [
        "verify",
        "--input",
        str(source),
        "--output",
        str(out),
        "--min-rounds",
        "0",
        "--concurrency",
        "2",
        "--items",
        "2",
    ]
    with FakeOpenAI(responder=_slow) as server:
        proc = _start([*args, "--base-url", server.base_url, "--model", "fake-model"])
        _wait(lambda: out.exists() and out.read_text().count("\n") >= 2)
        _interrupt(proc)
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        assert 2 <= len(kept) < 12 and all(r["result"]["verdict"] == "factual" for r in kept)
        assert not out.with_name(out.name + ".lock").exists()
        again = subprocess.run(
            [sys.executable, "-m", "debate.cli", *args, "--base-url", server.base_url, "--model", "fake-model"],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=120,
        )
        assert again.returncode == 0, again.stderr
        assert f"{len(kept)} already done" in again.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"q{i}" for i in range(12)]
