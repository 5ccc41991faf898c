"""A results log is what its input and settings say: `debate verify --input FILE --output LOG` run again after the
input was edited, as a team keeping one log per week of traffic does, against a scripted endpoint on 127.0.0.1.
One test per row of docs/results.md's table "What a re-run does"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.calibration import calibration, save_calibration
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import cli_env, debate, op

pytestmark = pytest.mark.slow  # starts processes

NO_ENDPOINT = ("--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "fake-model")


def _agreeing(call: Call) -> Reply:
    return Reply(content=op("Paris" in call.asked, 0, "checked"))


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "question": "Capital of France?",
            "response": "Paris" if i % 2 == 0 else "Lyon",
            "reference": "The capital lies on the Seine.",
        }
        for i in range(n)
    ]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _history(path: Path) -> list[dict[str, Any]]:
    history = path.with_name(path.stem + ".history.jsonl")
    return [json.loads(line) for line in history.read_text().splitlines()] if history.exists() else []


def _claims_asked(server: FakeOpenAI) -> set[str]:
    return {c.item for c in server.calls if c.item is not None}


def test_each_edit_of_the_input_is_what_the_rerun_does(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "verdicts.jsonl"
    rows = _rows(6)
    _write(source, rows)
    args = ("verify", "--input", str(source), "--output", str(out), "--debate.min-rounds", "0")
    with FakeOpenAI(routes={"debate": _agreeing}) as server:
        url = ("--model.base-url", server.base_url, "--model.model", "fake-model")
        first = debate(*args, *url)
        assert first.returncode == 0, first.stderr
        assert all(r["input_sha256"] for r in _log(out))

        # a response corrected, a reference changed: those two lines verified again, the old records kept
        rows[1]["response"] = "Paris"
        rows[4]["reference"] = "Paris lies on the Seine."
        _write(source, rows)
        server.calls.clear()
        edited = debate(*args, *url)
        assert edited.returncode == 0, edited.stderr
        assert "2 changed line(s) redone" in edited.stderr and "4 already done" in edited.stderr
        assert _claims_asked(server) == {"q1", "q4"}
        log = {r["id"]: r for r in _log(out)}
        assert log["q1"]["response"] == "Paris" and log["q1"]["result"]["verdict"] == "factual"
        assert [h["record"]["id"] for h in _history(out)] == ["q1", "q4"]
        assert {h["superseded"]["why"] for h in _history(out)} == {"superseded"}
        assert _history(out)[0]["record"]["result"]["verdict"] == "non_factual"  # the old verdict, not lost

    # labels added afterwards: updated with no model at all (the endpoint is not there)
    for i, row in enumerate(rows):
        row["label_factual"] = i % 3 != 0
    _write(source, rows)
    labelled = debate(*args, *NO_ENDPOINT)
    assert labelled.returncode == 0, labelled.stderr
    assert "6 label(s) updated" in labelled.stderr
    assert [r["label_factual"] for r in _log(out)] == [i % 3 != 0 for i in range(6)]

    # lines reordered and one removed: the log follows the input, the gone record leaves it for the history
    moved = [rows[5], rows[0], rows[1], rows[2], rows[4]]
    _write(source, moved)
    again = debate(*args, *NO_ENDPOINT)
    assert again.returncode == 0, again.stderr
    assert "1 record(s) whose line is gone" in again.stderr
    assert [(r["id"], r["line"]) for r in _log(out)] == [("q5", 1), ("q0", 2), ("q1", 3), ("q2", 4), ("q4", 5)]
    assert [h["record"]["id"] for h in _history(out) if h["superseded"]["why"] == "line gone"] == ["q3"]
    report = subprocess.run(
        [sys.executable, "-m", "debate.cli", "report", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=False,
    )
    assert report.returncode == 0, report.stderr
    row = json.loads(report.stdout)["results_logs"][0]
    assert (row["records"], row["gone"], row["gone_counted"]) == (5, 1, False)
    counted = subprocess.run(
        [sys.executable, "-m", "debate.cli", "report", str(out), "--with-gone"],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=False,
    )
    assert "1 record(s) whose input line is gone (in its history), counted above" in counted.stdout
    assert f"| {out} | 6 |" in counted.stdout

    # nothing changed: nothing to do
    still = debate(*args, *NO_ENDPOINT)
    assert still.returncode == 0 and "done: 0 written, 5 already done" in still.stderr


def test_a_relabelled_log_fits_as_one_labelled_from_the_start(tmp_path: Path) -> None:
    rows = _rows(8)
    later, start = tmp_path / "later.jsonl", tmp_path / "start.jsonl"
    with FakeOpenAI(routes={"debate": _agreeing}) as server:
        url = ("--model.base-url", server.base_url, "--model.model", "fake-model")
        _write(tmp_path / "plain.jsonl", rows)
        assert debate("verify", "--input", str(tmp_path / "plain.jsonl"), "--output", str(later), *url).returncode == 0
        for row in rows:
            row["label_factual"] = row["response"] == "Paris"
        _write(tmp_path / "labelled.jsonl", rows)
        assert (
            debate("verify", "--input", str(tmp_path / "labelled.jsonl"), "--output", str(start), *url).returncode == 0
        )
    relabel = debate("verify", "--input", str(tmp_path / "labelled.jsonl"), "--output", str(later), *NO_ENDPOINT)
    assert relabel.returncode == 0 and "8 label(s) updated" in relabel.stderr, relabel.stderr
    fits = []
    for log in (later, start):
        saved = tmp_path / f"{log.stem}.cal.json"
        fit = debate("dynamics", "fit", str(log), "--save", str(saved), "--bootstrap", "10")
        assert fit.returncode == 0, fit.stderr
        assert "fitted without labels" not in fit.stdout + fit.stderr
        fitted = json.loads(saved.read_text())
        fits.append({k: v for k, v in fitted.items() if k not in ("source", "created_at", "fitted_on")})
        fits[-1]["claims"] = fitted["fitted_on"]["claims"]
    assert fits[0] == fits[1]


def test_a_calibration_changed_in_place_is_refused_then_redone_with_redo(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "verdicts.jsonl"
    _write(source, _rows(3))
    cal = Path(save_calibration(tmp_path, calibration(model="fake-model")))
    args = ("verify", "--input", str(source), "--output", str(out), "--debate.calibration", str(cal))
    with FakeOpenAI(routes={"debate": _agreeing}) as server:
        url = ("--model.base-url", server.base_url, "--model.model", "fake-model")
        assert debate(*args, *url).returncode == 0
        old = calibration(model="fake-model")
        refit = old.model_copy(update={"fitted_on": old.fitted_on.model_copy(update={"claims": 101})})
        cal.write_text(refit.model_dump_json())
        refused = debate(*args, *NO_ENDPOINT)
        assert refused.returncode == 2
        assert "the file of debate.calibration changed" in refused.stderr and "--redo" in refused.stderr
        server.calls.clear()
        redone = debate(*args, *url, "--redo")
        assert redone.returncode == 0, redone.stderr
        assert "3 redone for changed settings (--redo)" in redone.stderr
        assert _claims_asked(server) == {"q0", "q1", "q2"}
        assert len(_history(out)) == 3
        fresh = debate(*args, *url, "--fresh")
        assert fresh.returncode == 0, fresh.stderr
        assert "3 written" in fresh.stderr
        assert [h["superseded"]["why"] for h in _history(out)][-3:] == ["fresh start"] * 3
    assert len(_log(out)) == 3


def test_kill_9_while_changed_lines_are_redone_loses_nothing(tmp_path: Path) -> None:
    """Killed while it redoes edited lines, the log still holds each line's old or new record, and the history
    keeps every superseded one; the next run finishes the rest and no record is lost or doubled."""
    source, out = tmp_path / "in.jsonl", tmp_path / "verdicts.jsonl"
    rows = _rows(10)
    _write(source, rows)

    def slow(call: Call) -> Reply:
        reply = _agreeing(call)
        reply.delay_s = 0.15
        return reply

    args = ["verify", "--input", str(source), "--output", str(out), "--debate.min-rounds", "0"]
    args += ["--model.max-concurrency", "2"]
    with FakeOpenAI(routes={"debate": slow}) as server:
        url = ["--model.base-url", server.base_url, "--model.model", "fake-model"]
        assert debate(*args, *url).returncode == 0
        old = {r["id"]: r for r in _log(out)}
        for row in rows:
            row["response"] = "Paris" if row["response"] == "Lyon" else "Lyon"
        _write(source, rows)
        proc = subprocess.Popen(
            [sys.executable, "-m", "debate.cli", *args, *url], env=cli_env(), stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and out.read_text().count("\n") < 13:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for record in _log(out):
            assert record["id"] in old  # every line's old or new record is still in the log
        done = debate(*args, *url)
        assert done.returncode == 0, done.stderr
    log = _log(out)
    assert [r["id"] for r in log] == [r["id"] for r in rows]
    assert all(r["response"] == row["response"] for r, row in zip(log, rows, strict=True))
    kept = [h["record"] for h in _history(out)]
    assert sorted(r["id"] for r in kept) == sorted(old)  # every old record, once
    assert all(r["result"] == old[r["id"]]["result"] for r in kept)
