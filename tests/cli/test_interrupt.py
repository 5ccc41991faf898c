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

from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import cli_env, op, sigint_default

pytestmark = pytest.mark.slow  # starts processes

INTERRUPTED = "debate: interrupted"
ANY_LINE = ""
"""For _interrupt: the caller checks the last line itself."""


def _slow(body: dict[str, Any]) -> Reply:
    return Reply(content=op(True), delay_s=0.4)


def _stuck(body: dict[str, Any]) -> Reply:
    return Reply(content=op(True), delay_s=30)


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "debate.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=sigint_default,
    )


def _interrupt(proc: subprocess.Popen[str], signum: int = signal.SIGINT, line: str = INTERRUPTED) -> str:
    """Send the signal; the command ends with exactly `line` (its last), its exit code, and no noise. The endpoint's
    replies take 30 s, longer than the 25 s allowed here, so a command that waited for one would fail."""
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    waited = time.monotonic() - sent
    assert proc.returncode == (143 if signum == signal.SIGTERM else 130), err
    lines = err.strip().splitlines()
    assert line == ANY_LINE or lines[-1] == line, err
    for noise in ("Traceback", "ERROR", "CancelledError", "KeyboardInterrupt", "task_done", "Exception"):
        assert noise not in err, err
    # an upper bound below the reply's 30 s: a command that waited for the endpoint cannot pass it, however loaded
    assert waited < 25, f"{waited:.1f} s to stop: it waited for the endpoint"
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
            "--model.base-url",
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


@pytest.mark.parametrize(("signum", "line"), [(signal.SIGINT, INTERRUPTED), (signal.SIGTERM, "debate: terminated")])
def test_a_signal_mid_debate_is_one_line_and_does_not_wait_for_the_endpoint(signum: int, line: str) -> None:
    """Nothing was written, so nothing is said to be kept; SIGTERM cancels the work as Ctrl-C does (no asyncio or
    autogen shutdown errors)."""
    replies = iter([Reply(content=op(True))])
    with FakeOpenAI(responder=lambda body: next(replies, None) or _stuck(body)) as server:
        proc = _start(
            [
                "verify",
                "--question",
                "Capital of France?",
                "--answer",
                "Paris.",
                "--evidence",
                "Paris is the capital of France.",
                "--model.base-url",
                server.base_url,
                "--model.model",
                "fake-model",
            ]
        )
        _wait(lambda: len(server.requests) >= 2)  # the initial agent answered, the chain is running
        _interrupt(proc, signum, line)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_before_any_record_says_none_was_kept(tmp_path: Path, signum: int) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 4)
    with FakeOpenAI(responder=_stuck) as server:
        proc = _start(
            [
                "verify",
                "--input",
                str(source),
                "--output",
                str(out),
                "--model.base-url",
                server.base_url,
                "--model.model",
                "fake-model",
            ]
        )
        _wait(lambda: len(server.requests) >= 1)
        how = "terminated" if signum == signal.SIGTERM else "interrupted"
        _interrupt(proc, signum, f"debate: {how}; no record was finished")


def test_ctrl_c_mid_batch_keeps_finished_records_and_resumes(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 12)
    args = [
        "verify",
        "--input",
        str(source),
        "--output",
        str(out),
        "--debate.min-rounds",
        "0",
        "--model.max-concurrency",
        "2",
        "--items",
        "2",
    ]
    with FakeOpenAI(responder=_slow) as server:
        proc = _start([*args, "--model.base-url", server.base_url, "--model.model", "fake-model"])
        _wait(lambda: out.exists() and out.read_text().count("\n") >= 2)
        err = _interrupt(proc, line=ANY_LINE)
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        said = f"debate: interrupted; {len(kept)} finished record(s) kept in {out}; run the same command to resume"
        assert err.strip().splitlines()[-1] == said
        assert 2 <= len(kept) < 12 and all(r["result"]["verdict"] == "factual" for r in kept)
        assert not out.with_name(out.name + ".lock").exists()
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "debate.cli",
                *args,
                "--model.base-url",
                server.base_url,
                "--model.model",
                "fake-model",
            ],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=120,
        )
        assert again.returncode == 0, again.stderr
        assert f"{len(kept)} already done" in again.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"q{i}" for i in range(12)]
