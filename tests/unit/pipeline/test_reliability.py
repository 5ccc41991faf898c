"""Nothing lost, nothing stale: resume after outages, input bytes, one writer per output, clear refusals and exit
codes, grouped fsync. Real HTTP against servers the tests start on 127.0.0.1; the `debate` command as a user runs
it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.results import ResultRecord, ResultsLog, run_batch, scan_results
from debate.testing import sample_report
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import FIXTURES, REFCHECKER_EXAMPLE, debate, op
from tests.support.helpers import cli_env as _env


def _items(path: Path, n: int) -> list[str]:
    rows = [{"id": f"q{i}", "question": f"Capital {i}?", "response": "Paris", "reference": "Paris."} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [r["id"] for r in rows]


class Switch:
    """An endpoint that answers 503 while `down`, else an agreeing opinion."""

    def __init__(self) -> None:
        self.down = True

    def __call__(self, body: dict[str, Any]) -> Reply:
        return Reply(status=503, error_message="upstream down") if self.down else Reply(content=op(True))


def _batch(source: Path, out: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return debate(
        "verify",
        "--input",
        str(source),
        "--output",
        str(out),
        "--model.base-url",
        url,
        "--model.model",
        "fake-model",
        "--debate.min-rounds",
        "0",
        "--model.max-concurrency",
        "1",
        "--model.timeout-s",
        "5",
        # short waits between retries: these tests are about what an outage leaves, not how long the backoff is
        # (tests/unit/llm covers that), and the default (1 s, doubling, 4 attempts) costs seconds per failed item
        "--model.backoff-initial-s",
        "0.01",
        *extra,
    )


@pytest.mark.slow  # runs the `debate` command
def test_an_outage_stops_the_batch_and_a_rerun_redoes_what_failed(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = _items(source, 8)
    switch = Switch()
    with FakeOpenAI(responder=switch) as server:
        down = _batch(source, out, server.base_url, "--max-consecutive-failures", "3", "--items", "1")
        assert down.returncode == 1, down.stderr
        assert "3 items in a row failed" in down.stderr and "re-run to resume" in down.stderr
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(kept) == 3 and all(r["result"]["verdict"] == "unverifiable" for r in kept)
        assert all(r["result"]["claims"][0]["failure"]["transient"] for r in kept)
        switch.down = False
        calls = len(server.requests)
        back = _batch(source, out, server.base_url)
        assert back.returncode == 0, back.stderr
        assert "3 redone" in back.stderr and len(server.requests) - calls == 8  # 3 redone + 5 never done
        again = _batch(source, out, server.base_url)
        assert again.returncode == 0 and "8 already done" in again.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ids  # exactly one record per input line, in input order
    assert all(r["result"]["verdict"] == "factual" for r in records)


@pytest.mark.slow  # runs the `debate` command
def test_no_retry_failed_keeps_failures_as_they_are(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 2)
    switch = Switch()
    with FakeOpenAI(responder=switch) as server:
        # 2 failures, fewer than 5 in a row, but no model call of the run succeeded: exit 1 (issue 43), not 0.
        down = _batch(source, out, server.base_url)
        assert down.returncode == 1 and "no model call succeeded in this run (2 item(s) unfinished" in down.stderr
        switch.down = False
        kept = _batch(source, out, server.base_url, "--no-retry-failed")
        # kept as they are, and still not checked: the gate says so (exit 5)
        assert kept.returncode == 5 and "2 already done" in kept.stderr
        assert "2 of 2 input line(s) not checked (2 unfinished (transient failure)" in kept.stderr
        redone = _batch(source, out, server.base_url)
        assert redone.returncode == 0 and "2 redone" in redone.stderr


@pytest.mark.slow  # runs the `debate` command
def test_input_bytes_bom_crlf_and_a_non_utf8_line(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    good = [
        json.dumps({"id": f"q{i}", "question": "Capital?", "response": "Paris", "reference": "Paris."})
        for i in range(3)
    ]
    bad = b'{"id": "q9", "response": "caf\xe9"}'  # latin-1, not UTF-8
    source.write_bytes(b"\xef\xbb\xbf" + good[0].encode() + b"\r\n" + bad + b"\r\n" + "\r\n".join(good[1:]).encode())
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        first = _batch(source, out, server.base_url)
        assert first.returncode == 5 and "1 of 4 input line(s) not checked" in first.stderr, first.stderr
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r.get("id") for r in records] == ["q0", None, "q1", "q2"]
        assert records[1]["error"]["kind"] == "input"
        assert records[1]["error"]["message"] == "line 2: not valid UTF-8 (byte 0xe9 at column 30)"
        calls = len(server.requests)
        assert _batch(source, out, server.base_url).returncode == 5
        assert len(server.requests) == calls  # the bad line is still bad: its record stands, nothing redone
        fixed = source.read_bytes().replace(b"caf\xe9", "café".encode())
        source.write_bytes(fixed)
        again = _batch(source, out, server.base_url)
        assert again.returncode == 0 and "1 redone" in again.stderr and len(server.requests) == calls + 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["q0", "q9", "q1", "q2"] and all("result" in r for r in records)


@pytest.mark.slow
def test_a_second_writer_on_the_same_output_is_refused(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 6)

    second_done = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        # the first writer stays busy until the second has been refused, however slow a loaded machine starts it
        return Reply(content=op(True), hold=second_done)

    with FakeOpenAI(responder=slow) as server:
        args = [
            sys.executable,
            "-m",
            "debate.cli",
            "verify",
            "--input",
            str(source),
            "--output",
            str(out),
            "--model.base-url",
            server.base_url,
            "--model.model",
            "fake-model",
            "--debate.min-rounds",
            "0",
            "--model.max-concurrency",
            "1",
        ]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        deadline = time.monotonic() + 30
        lock = out.with_name(out.name + ".lock")
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.05)
        # the first writer's replies wait for this one to end: a second that waited for the lock would hang until
        # its own timeout and fail there, so no duration is asserted
        try:
            second = _batch(source, out, server.base_url)
        finally:
            second_done.set()
        assert second.returncode == 2, second.stderr
        assert f"being written by another process (PID {first.pid})" in second.stderr
        first.communicate(timeout=60)
        assert first.returncode == 0
    assert not lock.exists()  # removed on a clean exit, so run folders do not collect lock files
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [f"q{i}" for i in range(6)]  # every id exactly once


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: ("in.jsonl", "in.jsonl"), "same file"),
        (lambda d: ("in.jsonl", "."), "is a directory"),
        (lambda d: ("in.jsonl", "in.jsonl/out.jsonl"), "is a file, not a directory"),
        (lambda d: ("in.jsonl", "/proc/no-such-dir/out.jsonl"), "cannot write there"),
    ],
)
def test_unusable_output_paths_are_refused_in_one_line(tmp_path: Path, make: Any, message: str) -> None:
    source = tmp_path / "in.jsonl"
    _items(source, 1)
    _, output = make(tmp_path)
    target = output if output.startswith("/") else str(tmp_path / output)
    done = debate("verify", "--input", str(source), "--output", target, "--model.base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_base_url_is_validated_and_an_unreachable_endpoint_exits_1(tmp_path: Path) -> None:
    bad = debate("verify", "--answer", "Paris", "--model.base-url", "not a url")
    assert bad.returncode == 2 and "must be an http(s) URL with a host" in bad.stderr
    down = debate(
        "verify",
        "--answer",
        "Paris",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
        "--model.model",
        "m",
        "--model.timeout-s",
        "1",
        "--model.backoff-initial-s",
        "0.01",
    )
    assert down.returncode == 1 and "nothing answers at http://127.0.0.1:9/v1" in down.stderr
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _items(source, 2)
    batch = _batch(source, out, "http://127.0.0.1:9/v1")
    assert batch.returncode == 1 and "nothing answers at" in batch.stderr


@pytest.mark.slow
def test_fail_on_gates_ci_with_exit_3(tmp_path: Path) -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(False, 4))) as server:
        args = [
            "verify",
            "--answer",
            "Lyon",
            "--question",
            "Capital of France?",
            "--model.base-url",
            server.base_url,
            "--debate.min-rounds",
            "0",
        ]
        assert debate(*args).returncode == 0
        assert debate(*args, "--fail-on", "non-factual").returncode == 3
        assert debate(*args, "--fail-on", "unverifiable").returncode == 0
        source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        _items(source, 2)
        gated = _batch(source, out, server.base_url, "--fail-on", "any")
        assert gated.returncode == 3 and "2 record(s) matched" in gated.stderr
    shown = debate("verify", "--help")
    assert "exit status:" in shown.stdout and "3 --fail-on matched" in " ".join(shown.stdout.split())
    every = debate("verify", "--help-all")
    assert "exit status:" in every.stdout and "3  --fail-on matched a verdict" in every.stdout


async def test_malformed_replies_make_one_item_unverifiable_and_the_batch_goes_on(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": "a", "question": "Capital?", "response": "Paris"}, {"id": "b", "question": "HTML?", "response": "x"}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    routes = {  # item b's calls get a proxy's HTML page, every other debate call an opinion
        "debate@b": lambda call: Reply(body="<html>proxy error</html>", content_type="text/html"),
        "debate": lambda call: Reply(content=op(True)),
    }
    with FakeOpenAI(routes=routes) as server:
        config = VerifierConfig(
            model=ModelConfig(base_url=server.base_url, model="fake-model", max_attempts=2, backoff_initial_s=0.01),
            debate=DebateConfig(min_rounds=0, max_rounds=0),
        )
        async with Verifier(config=config) as verifier:
            summary = await run_batch(verifier=verifier, input_path=source, output_path=out, items_in_flight=2)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["result"]["verdict"] for r in records] == ["factual", "unverifiable"]
    failure = records[1]["result"]["claims"][0]["failure"]
    assert failure["kind"] == "model_unavailable" and failure["transient"] and "not JSON" in failure["message"]
    assert summary.processed == 2


REPORT = sample_report(["factual"])


def test_fsync_is_grouped_and_a_torn_last_line_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.jsonl"
    syncs: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with ResultsLog(path, sync_every=10, sync_interval_s=60) as log:
        for i in range(25):
            log.write(ResultRecord(id=f"q{i}", line=i + 1, result=REPORT))
        assert len(syncs) == 2  # after 10 and 20 records, not 25 times
    assert len(syncs) == 3  # and once at close
    with path.open("a") as fh:
        fh.write('{"id": "q25", "result": {"verd')  # a kill in the middle of a record
    state = scan_results(path)
    assert sorted(state.final) == sorted(f"q{i}" for i in range(25))
    assert path.read_text().count("\n") == 25 and path.read_text().endswith("}\n")


@pytest.mark.slow
def test_eval_checks_data_before_making_a_folder_and_names_config_differences(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    missing = debate(
        "eval",
        "halueval",
        "--task",
        "qa",
        "--n",
        "2",
        "--data-dir",
        str(tmp_path / "nothing"),
        "--runs-root",
        str(runs),
        "--model.base-url",
        "http://127.0.0.1:9/v1",
        "--model.model",
        "m",
    )
    assert missing.returncode == 2 and "data file not found" in missing.stderr
    assert not runs.exists()
    data = FIXTURES / "data"
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        common = [
            "eval",
            "halueval",
            "--task",
            "qa",
            "--data-dir",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--model.base-url",
            server.base_url,
            "--method",
            "single",
            "--no-cache",
        ]
        assert debate(*common, "--n", "2").returncode == 0
        other = debate(*common, "--n", "3")
        assert other.returncode == 2 and "n: 2 -> 3" in other.stderr and "--overwrite" in other.stderr
        replaced = debate(*common, "--n", "3", "--overwrite")
        assert replaced.returncode == 0, replaced.stderr
    rows = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 3


@pytest.mark.slow
def test_refchecker_json_array_input(tmp_path: Path) -> None:
    """RefChecker's own input: a JSON array, no ids, a reference as text or a list of passages, optional triplets."""
    source, out = tmp_path / "refchecker.json", tmp_path / "out.jsonl"
    items = REFCHECKER_EXAMPLE
    source.write_text(json.dumps(items, indent=2))
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        done = debate(
            "verify",
            "--input",
            str(source),
            "--output",
            str(out),
            "--model.base-url",
            server.base_url,
            "--debate.min-rounds",
            "0",
            "--task",
            "general",
            "--retrieval.retriever",
            "bm25",
        )
        # the endpoint answers every request with an opinion, so the first item's claims (to extract) are not
        # obtained: that line is not checked, and the gate says so (exit 5); the second's claims are given
        assert done.returncode == 5 and "1 of 2 input line(s) not checked (1 failed" in done.stderr, done.stderr
        assert "extract" not in server.purposes[-2:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["0", "1"]
    second = records[1]["result"]
    assert second["extraction"]["method"] == "given"
    assert [c["text"] for c in second["claims"]] == ["Eiffel Tower located in Paris.", "Eiffel Tower opened in 1889."]
    assert [e["text"] for e in second["claims"][0]["evidence"]][:2] in (
        ["The tower is in Paris.", "It opened to the public in 1889."],
        ["It opened to the public in 1889.", "The tower is in Paris."],
    )
    broken = tmp_path / "broken.json"
    broken.write_text('[{"response": "x"},\n  {"response": ')
    refused = debate(
        "verify",
        "--input",
        str(broken),
        "--output",
        str(tmp_path / "o.jsonl"),
        "--model.base-url",
        "http://127.0.0.1:9/v1",
    )
    assert (
        refused.returncode == 2 and "broken.json line 2 column" in refused.stderr and "not valid JSON" in refused.stderr
    )
