"""What a result depends on, all of it (issue 83): `debate verify` on real files against a scripted endpoint on
127.0.0.1, as a team that gates its releases on it and refits weekly runs it. A gate that checked nothing does not
pass; a re-run after any change of a setting or of a file a verdict reads is refused or redone, never "already
done", and the same bytes at a new path are; the log's history survives a torn last line; the command line's
answers (round three)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from debate.cli import main
from tests.support.calibration import calibration, save_calibration
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import debate, op

pytestmark = pytest.mark.slow  # starts processes

NO_ENDPOINT = ("--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "fake-model", "--debate.min-rounds", "0")


def _agreeing(call: Call) -> Reply:
    return Reply(content=op("Paris" in call.asked, 0, "checked"))


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "question": "Capital of France?", "response": "Paris", "reference": "Paris is the capital."}
        for i in range(n)
    ]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _summary(stderr: str) -> str:
    """The batch's summary line (the one that says what was done)."""
    return next(line for line in stderr.splitlines() if "done: " in line)


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAI(routes={"debate": _agreeing}) as fake:
        yield fake


def _url(server: FakeOpenAI) -> tuple[str, ...]:
    return ("--model.base-url", server.base_url, "--model.model", "fake-model", "--debate.min-rounds", "0")


def test_a_gate_that_checked_nothing_does_not_pass(server: FakeOpenAI, tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    # the commonest slip: "answer" for "response"; every line an input error
    slipped = _write(
        tmp_path / "answers.jsonl", [{"id": f"a{i}", "question": "Q?", "answer": "Paris"} for i in range(2)]
    )
    gate = ("--fail-on", "non-factual")
    run = debate("verify", "--input", str(slipped), "--output", str(out), *gate, *_url(server))
    assert run.returncode == 5, run.stderr
    assert _summary(run.stderr).startswith("2 of 2 input line(s) not checked (2 input or model error(s); first: line 1")
    assert "no input line was verified" in run.stderr
    # the same with --tolerate-unchecked: a batch that verified nothing never passes
    again = debate(
        "verify", "--input", str(slipped), "--output", str(out), *gate, "--tolerate-unchecked", *_url(server)
    )
    assert again.returncode == 5 and "already done" in _summary(again.stderr), again.stderr

    # every label the text "true": input errors, not a pass
    texts = [{**row, "label_factual": "true"} for row in _rows(2)]
    labelled = debate(
        "verify", "--input", str(_write(tmp_path / "t.jsonl", texts)), "--output", str(tmp_path / "t-out.jsonl"),
        *gate, *_url(server),
    )  # fmt: skip
    assert labelled.returncode == 5, labelled.stderr
    assert "label_factual" in _summary(labelled.stderr)

    # half the lines input errors, the rest pass: not checked is said first and fails the gate
    half = [*_rows(2), {"id": "x1", "question": "Q?", "answer": "Paris"}, {"id": "x2", "question": "Q?"}]
    source, half_out = _write(tmp_path / "half.jsonl", half), tmp_path / "half-out.jsonl"
    mixed = debate("verify", "--input", str(source), "--output", str(half_out), *gate, *_url(server))
    assert mixed.returncode == 5, mixed.stderr
    assert _summary(mixed.stderr).startswith("2 of 4 input line(s) not checked"), mixed.stderr
    assert "--tolerate-unchecked" in mixed.stderr
    # a re-run with nothing left to do reads the whole log, not only what it wrote
    settled = debate("verify", "--input", str(source), "--output", str(half_out), *gate, *NO_ENDPOINT)
    assert settled.returncode == 5 and "4 already done" in settled.stderr, settled.stderr
    tolerated = debate(
        "verify", "--input", str(source), "--output", str(half_out), *gate, "--tolerate-unchecked", *NO_ENDPOINT
    )
    assert tolerated.returncode == 0, tolerated.stderr
    assert _summary(tolerated.stderr).startswith("2 of 4 input line(s) not checked")


def test_a_changed_sampling_setting_is_never_already_done(server: FakeOpenAI, tmp_path: Path) -> None:
    source, out = _write(tmp_path / "in.jsonl", _rows(3)), tmp_path / "v.jsonl"
    args = ("verify", "--input", str(source), "--output", str(out))
    assert debate(*args, *_url(server)).returncode == 0
    changed = ("--model.temperature", "0.9", "--model.max-tokens", "64")
    before = len(server.calls)
    refused = debate(*args, *_url(server), *changed)
    assert refused.returncode == 2, refused.stderr
    assert "model.temperature: 0.0 -> 0.9" in refused.stderr and "model.max_tokens: 512 -> 64" in refused.stderr
    assert len(server.calls) == before  # refused before any call
    # one line added: the same refusal, naming the same settings
    _write(source, _rows(4))
    grown = debate(*args, *_url(server), *changed)
    assert grown.returncode == 2 and "model.temperature: 0.0 -> 0.9" in grown.stderr, grown.stderr
    redone = debate(*args, *_url(server), *changed, "--redo")
    assert redone.returncode == 0, redone.stderr
    assert "3 redone for changed settings (--redo)" in redone.stderr
    sent = [c.body for c in server.calls[before:]]
    assert sent and all(b["temperature"] == 0.9 and b["max_tokens"] == 64 for b in sent)
    done = debate(*args, *_url(server), *changed)
    assert done.returncode == 0 and "0 written, 4 already done" in done.stderr, done.stderr


def test_every_file_a_verdict_reads_is_digested_and_content_decides(server: FakeOpenAI, tmp_path: Path) -> None:
    folder = tmp_path / "chains"
    folder.mkdir()
    (folder / "checker.toml").write_text(
        'variables = ["claim", "evidence", "previous"]\nsystem = "You check every date."\n'
        'user = """$evidence\n$claim\n$previous"""\n'
    )
    chain = folder / "with-checker.toml"
    chain.write_text(
        'name = "with-checker"\n[states]\nS0 = ["initial"]\nS1 = ["trust", "checker", "skeptic", "leader"]\n'
        '[transitions."*"]\ntrue = "S1"\nfalse = "S1"\n[roles.checker]\nprompt = "checker.toml"\nsees = "previous"\n'
        'title = "Checker"\n'
    )
    source, out = _write(tmp_path / "in.jsonl", _rows(2)), tmp_path / "v.jsonl"
    args = ("verify", "--input", str(source), "--output", str(out))
    first = debate(*args, "--debate.chain", str(chain), *_url(server))
    assert first.returncode == 0, first.stderr
    # the same bytes at a new path: the same settings
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    done = debate(*args, "--debate.chain", str(moved / "with-checker.toml"), *NO_ENDPOINT)
    assert done.returncode == 0 and "0 written, 2 already done" in done.stderr, done.stderr
    # the role's prompt file edited in place: refused, naming that file
    (folder / "checker.toml").write_text((folder / "checker.toml").read_text().replace("date", "number"))
    refused = debate(*args, "--debate.chain", str(chain), *NO_ENDPOINT)
    assert refused.returncode == 2, refused.stderr
    assert "the file of debate.chain.prompts.checker changed" in refused.stderr
    # the chain file itself edited in place (a comment is a change of its bytes)
    chain.write_text(chain.read_text() + "# edited\n")
    shutil.copy(moved / "checker.toml", folder / "checker.toml")
    edited = debate(*args, "--debate.chain", str(chain), *NO_ENDPOINT)
    assert edited.returncode == 2 and "the file of debate.chain changed" in edited.stderr, edited.stderr

    # a calibration: the same bytes at a new path are the same setting
    cal = Path(save_calibration(tmp_path, calibration(model="fake-model")))
    calibrated = ("verify", "--input", str(source), "--output", str(tmp_path / "c.jsonl"))
    assert debate(*calibrated, "--debate.calibration", str(cal), *_url(server)).returncode == 0
    copy = tmp_path / "elsewhere" / "cal.json"
    copy.parent.mkdir()
    shutil.copy(cal, copy)
    again = debate(*calibrated, "--debate.calibration", str(copy), *NO_ENDPOINT)
    assert again.returncode == 0 and "0 written, 2 already done" in again.stderr, again.stderr


def test_a_torn_history_is_read_past_and_never_glued_to(server: FakeOpenAI, tmp_path: Path) -> None:
    source, out = _write(tmp_path / "in.jsonl", _rows(4)), tmp_path / "v.jsonl"
    args = ("verify", "--input", str(source), "--output", str(out))
    assert debate(*args, *_url(server)).returncode == 0
    _write(source, _rows(4)[:3])
    dropped = debate(*args, *NO_ENDPOINT)
    assert dropped.returncode == 0 and "1 record(s) whose line is gone, 1 old record(s) kept in" in dropped.stderr
    history = tmp_path / "v.history.jsonl"
    whole = history.read_bytes()
    history.write_bytes(whole + whole[: len(whole) // 2])  # what a kill during an append leaves
    report = debate("report", str(out), "--with-gone")
    assert report.returncode == 0, report.stderr
    assert "1 torn line(s) in its history skipped" in report.stdout
    _write(source, _rows(4)[:2])
    again = debate(*args, *NO_ENDPOINT)
    assert again.returncode == 0, again.stderr
    entries = [json.loads(raw) for raw in history.read_bytes().splitlines()]  # the fragment cut, nothing glued
    assert [e["record"]["id"] for e in entries] == ["q3", "q2"]
    counted = debate("report", str(out), "--with-gone", "--format", "json")
    assert json.loads(counted.stdout)["results_logs"][0]["gone"] == 2


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of a command refused in one line (exit 2), run in this process."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = int(str(exc.code))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err


def test_the_command_line_round_three(server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = _write(tmp_path / "in.jsonl", _rows(2)), tmp_path / "v.jsonl"
    args = ("verify", "--input", str(source), "--output", str(out))
    # a refusal after parsing leaves no 0-byte output behind
    refused = debate(*args, "--debate.calibration", str(tmp_path / "missing.json"), *_url(server))
    assert refused.returncode == 2 and not out.exists(), refused.stderr
    assert debate(*args, *_url(server)).returncode == 0
    fresh = debate(*args, *_url(server), "--fresh")
    assert fresh.returncode == 0 and "2 old record(s) kept in" in fresh.stderr, fresh.stderr
    for argv, said in (
        ((*args, "--fresh", "--redo"), "--redo adds nothing to it"),
        (("verify", "--question", "Q?", "--answer", "A", "--brief", "--show-prompts"), "--show-prompts prints"),
        (("verify", "--est"), "did you mean --estimate or --estimate-from for --est?"),
        (("dynamics", "fit", "x.jsonl", "--b", "1"), "did you mean --base-rate or --bootstrap for --b?"),
        (("verify", "--ro", "x"), "did you mean --roles, --rollup or --rollup-options for --ro?"),
        (("verify", "--question", "Q?", "--answer", "A", "--roles", "leader"), "e.g. leader.model.model=gpt-4o-mini"),
        (("tour", "--simulated", "--roles", str(source)), "is `debate tour --population FILE`"),
    ):
        assert " ".join(_refused(list(argv), capsys).split()).count(said) == 1, (argv, said)
    for command in ("verify", "guard"):
        with pytest.raises(SystemExit):
            main([command, "--help-all"])
        assert "cascade:P" in capsys.readouterr().out
    # an item a transient failure left unfinished is counted as such by `debate report`, not as unverifiable
    server.routes["debate@q9"] = lambda call: Reply(status=503, error_message="overloaded")
    rows = [*_rows(2), {**_rows(1)[0], "id": "q9"}]
    partly, partly_out = _write(tmp_path / "partly.jsonl", rows), tmp_path / "partly-out.jsonl"
    run = debate(
        "verify", "--input", str(partly), "--output", str(partly_out), "--model.max-attempts", "1", *_url(server)
    )
    del server.routes["debate@q9"]
    assert run.returncode == 5 and "1 unfinished (transient failure)" in _summary(run.stderr), run.stderr
    shown = json.loads(debate("report", str(partly_out), "--format", "json").stdout)["results_logs"][0]
    assert (shown["unfinished"], shown["unverifiable"], shown["factual"]) == (1, 0, 2)
