"""A governed run end to end, as a user runs it: `debate verify --debate.calibration FILE --debate.stop posterior:P`
against a scripted endpoint on 127.0.0.1, what the table and the JSON say, and the refusals in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.calibration import FAILED_MARKOV, calibration, save_calibration
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import debate, op

pytestmark = pytest.mark.slow  # starts processes

ARGS = ("verify", "--question", "What is the capital of France?", "--answer", "Paris", "--evidence", "Paris is.")


def _agree(_call: object) -> Reply:
    return Reply(content=op(True, 0, "the evidence says so"))


def test_a_governed_run_stops_once_decided_and_says_its_probability(tmp_path: Path) -> None:
    path = save_calibration(tmp_path, calibration(model="fake-model"))
    with FakeOpenAI(routes={"debate": _agree}) as server:
        url = ("--model.base-url", server.base_url, "--model.model", "fake-model", "--debate.calibration", path)
        governed = debate(*ARGS, *url, "--debate.stop", "posterior:0.9", "--json")
        debated = [c.purpose for c in server.calls]
        table = debate(*ARGS, *url, "--debate.stop", "posterior:0.9")
        paper = debate(*ARGS, *url, "--json")
    assert governed.returncode == 0, governed.stderr
    report = json.loads(governed.stdout)
    claim = report["claims"][0]
    assert claim["debate"]["stop_reason"] == "posterior"
    assert debated == ["debate:initial", "debate:skeptic"]  # 0.727, then 0.941 >= 0.9
    assert claim["p_factual"] == pytest.approx(0.48 / 0.51) and report["p_factual"] == pytest.approx(0.48 / 0.51)
    assert report["calibration"]["stop"] == "posterior:0.9" and report["calibration"]["calibrated"] is True
    assert table.returncode == 0, table.stderr
    assert "p_factual 0.941" in table.stdout  # on the verdict's line
    assert table.stdout.count("p_factual") >= 2 and table.stdout.count("0.941") >= 2  # and the claims' column
    assert "stopped: posterior" in table.stdout
    full = json.loads(paper.stdout)["claims"][0]
    assert full["debate"]["stop_reason"] == "consensus" and full["p_factual"] > claim["p_factual"]


def test_a_calibration_of_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    path = save_calibration(tmp_path, calibration(model="another-model"))
    with FakeOpenAI(routes={"debate": _agree}) as server:
        done = debate(
            *ARGS, "--model.base-url", server.base_url, "--model.model", "fake-model", "--debate.calibration", path
        )
        assert not [c for c in server.calls if c.purpose.startswith("debate")]
    assert done.returncode != 0
    assert "was fitted on model 'another-model'; this run uses 'fake-model'" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_uncalibrated_probability_says_so_on_the_verdict_and_the_stop_needs_force(tmp_path: Path) -> None:
    path = save_calibration(tmp_path, calibration(model="fake-model", checks=[FAILED_MARKOV]))
    with FakeOpenAI(routes={"debate": _agree}) as server:
        url = ("--model.base-url", server.base_url, "--model.model", "fake-model", "--debate.calibration", path)
        shown = debate(*ARGS, *url, "--brief")
        refused = debate(*ARGS, *url, "--debate.stop", "posterior:0.9")
        forced = debate(*ARGS, *url, "--debate.stop", "posterior:0.9", "--debate.force-calibration", "--json")
    assert shown.returncode == 0, shown.stderr
    verdict_panel = shown.stdout.split("task:")[0]
    assert "p_factual is not calibrated: the markov check fails" in " ".join(verdict_panel.split())
    assert refused.returncode != 0 and "--debate.force-calibration to stop on it anyway" in refused.stderr
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["calibration"]["warning"].startswith("p_factual is not calibrated")


def test_estimate_says_which_stop_it_estimates(tmp_path: Path) -> None:
    path = save_calibration(tmp_path, calibration(model="fake-model"))
    base = (*ARGS, "--estimate", "--model.base-url", "http://127.0.0.1:9/v1", "--model.model", "fake-model")
    paper = debate(*base)
    governed = debate(*base, "--calibration", path, "--stop", "posterior:0.9", "--prior", "0.2")
    assert paper.returncode == 0 and governed.returncode == 0, (paper.stderr, governed.stderr)
    assert "stop: consensus (the paper's rule): a state's speakers agree from round 2, else round 5 ends it" in (
        " ".join(paper.stdout.split())
    )
    text = " ".join(governed.stdout.split())
    assert "stop: posterior:0.9: after each turn, p_factual >= 0.9 or <= 0.1 ends the debate, else round 5;" in text
    assert f"decided by {path} (100 claims of runs/fit" in text and "prior 0.200)" in text
