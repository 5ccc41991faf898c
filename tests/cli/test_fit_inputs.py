"""`debate dynamics fit`'s inputs are checked before it fits (issue 72): the same input twice, inputs of other
settings, a `--save` that would lose an input or fail after the fit, a `--db` that is not a desk's store, and the
paths a user mistypes are each refused in one line naming what was given, before any fitting (nothing printed on
standard output, the fit's table). A calibration file reads with a byte-order mark; one that is not a calibration
says what it is; `verify --estimate` refuses the calibration the run would refuse."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from debate.cli import main
from debate.concurrency import run_blocking
from debate.types import Report
from experiments.dynamics.examples import EXAMPLES
from experiments.dynamics.simulate import labels_for, simulated_reports
from experiments.dynamics.simulate_run import write_results_log
from tests.support.calibration import calibration, save_calibration

LABELS = labels_for(40, 0.5, 3, prefix="in")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `debate verify --output` log of 40 claims debated by the engine against the markov population, half of
    them labelled."""
    reports = run_blocking(
        simulated_reports(EXAMPLES["markov"], chain="true-to-skeptic", min_rounds=2, max_rounds=4, labels=LABELS)
    )
    path = tmp_path_factory.mktemp("fit-inputs") / "log.jsonl"
    write_results_log(path, {k: (v if i % 2 else None) for i, (k, v) in enumerate(LABELS.items())}, reports)
    return path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *said: str) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = int(str(exc.code))
    assert code == 2
    out, err = capsys.readouterr()
    assert out == "", "refused after fitting: the fit's table was printed"
    message = " ".join(err.split())
    for words in said:
        assert words in message, (words, message)
    assert "Traceback" not in err
    return message


def _edited(log: Path, target: Path, edit: dict[str, object]) -> Path:
    """A copy of `log` whose reports' meta (and config's debate settings) carry `edit`."""
    lines = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        meta = record["result"]["meta"]
        if "model" in edit:
            meta["model"] = edit["model"]
        if "max_rounds" in edit:
            meta["config"]["debate"]["max_rounds"] = edit["max_rounds"]
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")
    return target


def _fitted(argv: list[str], capsys: pytest.CaptureFixture[str], save: Path) -> tuple[dict[str, Any], str]:
    assert main([*argv, "--bootstrap", "10", "--save", str(save)]) == 0
    _, err = capsys.readouterr()
    return json.loads(save.read_text())["fitted_on"], " ".join(err.split())


def _reworked(log: Path, target: Path, *, flip: bool, rerun: bool) -> Path:
    """A copy of `log` under the same ids: each label flipped (`flip`), and (`rerun`) each debate another one (its
    turns' latencies changed, as a second debate of the same claim would have them)."""
    lines = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if flip and "label_factual" in record:
            record["label_factual"] = not record["label_factual"]
        if rerun:
            for claim in record["result"]["claims"]:
                for state in claim["debate"]["states"]:
                    for turn in state["turns"]:
                        turn["call"]["latency_s"] = turn["call"].get("latency_s", 0.0) + 0.5
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")
    return target


def test_two_logs_reusing_ids_are_two_sets_of_claims(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 83: the docs' "one log per week" with ids q-0.. each week was fitted as half the claims, silently
    week2 = _reworked(log, tmp_path / "week2.jsonl", flip=True, rerun=True)
    fitted_on, said = _fitted(["dynamics", "fit", str(log), str(week2)], capsys, tmp_path / "cal.json")
    assert fitted_on["claims"] == 80
    assert fitted_on["claims_per_input"] == {str(log): 40, str(week2): 40}
    assert f"{week2}: 40 claim id(s) an earlier input also used: fitted as claims of their own" in said


def test_the_same_debates_given_twice_count_once_and_opposite_labels_are_refused(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(["dynamics", "fit", str(log), str(log)], capsys, f"{log} is given twice")
    copy = tmp_path / "copy.jsonl"
    shutil.copy(log, copy)
    fitted_on, said = _fitted(["dynamics", "fit", str(log), str(copy)], capsys, tmp_path / "cal.json")
    assert fitted_on["claims"] == 40
    assert fitted_on["claims_per_input"] == {str(log): 40, str(copy): 0}
    assert f"{copy}: 40 claim(s) are the same debates as in {log} (found by their content): counted once" in said
    flipped = _reworked(log, tmp_path / "flipped.jsonl", flip=True, rerun=False)
    _refused(
        ["dynamics", "fit", str(log), str(flipped)],
        capsys,
        f"claim in-1/c0 of {log} and claim in-1/c0 of {flipped} are the same debate labelled",
    )
    twice = tmp_path / "twice.jsonl"
    first = log.read_text().splitlines()[0]
    twice.write_text(log.read_text() + first + "\n")
    _refused(["dynamics", "fit", str(twice)], capsys, "claim in-0/c0 is in record 1 and again in record 41")


def test_a_posterior_stop_run_is_fitted_only_with_the_calibration_it_decided_with(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cal = Path(save_calibration(tmp_path, calibration(model="simulated")))
    lines = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        meta = record["result"]["meta"]
        meta["config"]["debate"].update(stop="posterior:0.95", calibration=str(cal))
        meta["files"] = {"debate.calibration": "0" * 64}  # the file it ran with, since replaced at that path
        lines.append(json.dumps(record))
    stopped = tmp_path / "stopped.jsonl"
    stopped.write_text("\n".join(lines) + "\n")
    _refused(
        ["dynamics", "fit", str(stopped)],
        capsys,
        f"its stop decided with the calibration {cal} of sha256 000000000000, and that path now holds sha256",
    )


def test_inputs_of_other_settings_are_refused_naming_both_and_the_difference(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _edited(log, tmp_path / "other-model.jsonl", {"model": "another-model"})
    _refused(
        ["dynamics", "fit", str(log), str(other)],
        capsys,
        f"{log} and {other}",
        "model 'simulated' against 'another-model'",
    )
    rounds = _edited(log, tmp_path / "rounds.jsonl", {"max_rounds": 5})
    _refused(["dynamics", "fit", str(log), str(rounds)], capsys, f"{log} and {rounds}", "max rounds 4 against 5")


def test_a_save_path_that_would_lose_an_input_or_fail_is_refused_before_the_fit(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = log.read_bytes()
    _refused(["dynamics", "fit", str(log), "--save", str(log)], capsys, f"--save {log} would overwrite the input")
    assert log.read_bytes() == before
    _refused(["dynamics", "fit", str(log), "--save", str(tmp_path)], capsys, f"--save {tmp_path}: a folder")
    missing = tmp_path / "nowhere" / "cal.json"
    _refused(["dynamics", "fit", str(log), "--save", str(missing)], capsys, f"the folder {missing.parent} does not")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    _refused(["dynamics", "fit", str(log), "--save", str(notes)], capsys, "exists and is not a calibration file")
    assert notes.read_text() == "my notes"


def test_paths_a_user_mistypes_are_named(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["dynamics", "fit", str(tmp_path / "nope.jsonl")], capsys, f"{tmp_path / 'nope.jsonl'}: no such file")
    run = tmp_path / "ev1"
    run.mkdir()
    (run / "config.json").write_text("{}")
    shutil.copy(log, run / "results.jsonl")
    _refused(["dynamics", "fit", str(run / "results.jsonl")], capsys, f"give the folder (`debate dynamics fit {run}`)")
    _refused(["dynamics", "fit", str(log), "--base-rate", "1.5"], capsys, "--base-rate", "strictly between 0 and 1")
    labelled = tmp_path / "labelled.jsonl"
    write_results_log(labelled, dict(LABELS), [json_report(line) for line in log.read_text().splitlines()])
    _refused(["dynamics", "fit", str(labelled), "--base-rate", "0.5"], capsys, "every claim given is labelled")


def json_report(line: str) -> Report:
    return Report.model_validate(json.loads(line)["result"])


def test_a_db_that_is_not_a_desks_store_is_left_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    os.chmod(other, 0o644)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (other, empty):
        before = (path.read_bytes(), path.stat().st_mode)
        _refused(["dynamics", "fit", "--db", f"sqlite:///{path}"], capsys, f"sqlite:///{path}: not a desk's store")
        assert (path.read_bytes(), path.stat().st_mode) == before


def test_a_calibration_file_reads_with_a_mark_and_a_results_log_given_as_one_says_so(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from debate.calibration import load_calibration
    from debate.errors import CalibrationError

    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + calibration().model_dump_json().encode())
    assert load_calibration(marked).fitted_on.claims == 100
    with pytest.raises(CalibrationError, match=r"a results log .* not a calibration file"):
        load_calibration(log)
    args = ["verify", "--answer", "Paris", "--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "m"]
    _refused([*args, "--debate.calibration", ""], capsys, "calibration", "an empty path")


def test_estimate_refuses_the_calibration_the_run_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["verify", "--answer", "Paris", "--estimate", "--model.base-url", "http://127.0.0.1:9/v1"]
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "markov-debate-calibration", "version": 3}')
    _refused([*base, "--model.model", "fake-model", "--debate.calibration", str(corrupt)], capsys, "fitted_on")
    other = save_calibration(tmp_path, calibration(model="another-model"))
    _refused([*base, "--model.model", "fake-model", "--debate.calibration", other], capsys, "fitted on model")
    assert main([*base, "--model.model", "another-model", "--debate.calibration", other]) == 0
    assert "no model was called" in capsys.readouterr().out


def test_a_fit_records_each_roles_sampling_settings_and_a_run_at_others_is_refused(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save = tmp_path / "cal.json"
    fitted, _ = _fitted(["dynamics", "fit", str(log)], capsys, save)
    team = fitted["team"]
    assert set(team) == {"initial", "trust", "skeptic", "leader"}
    name, temperature = team["leader"]["name"], team["leader"]["temperature"]
    base = ["verify", "--answer", "Paris", "--estimate", "--model.base-url", "http://127.0.0.1:9/v1"]
    used = [*base, "--model.model", name, "--debate.calibration", str(save)]
    assert main([*used, "--model.temperature", str(temperature)]) == 0
    capsys.readouterr()
    # The same model at another temperature is another team: refused naming the setting, unless forced.
    other = str(temperature + 0.5)
    _refused([*used, "--model.temperature", other], capsys, f"at temperature {temperature!r} (now {float(other)!r})")
    assert main([*used, "--model.temperature", other, "--debate.force-calibration-team"]) == 0
