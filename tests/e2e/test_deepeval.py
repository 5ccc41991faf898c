"""The DeepEval metric under the real deepeval package, offline (telemetry off): `deepeval test run` on a user's
test file with `assert_test`, against a scripted judge on 127.0.0.1. The right answer passes, the wrong one
fails, and an unusable judge reply fails the test with the reason instead of giving a score."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import cli_env, op
from tests.support.phoenix import need

pytestmark = [pytest.mark.deepeval, pytest.mark.slow]

USER_TESTS = """
import json
import os

from deepeval import assert_test
from deepeval.test_case import LLMTestCase
from debate.integrations.deepeval import DebateFactualityMetric

CONTEXT = ["Paris is the capital of France. Rome is the capital of Italy."]


def check(name: str, answer: str) -> None:
    case = LLMTestCase(input=f"What is the capital of {name}?", actual_output=answer, context=CONTEXT)
    measured = DebateFactualityMetric(base_url=os.environ["JUDGE_URL"], model="fake-model")
    try:
        measured.measure(case)  # the metric on its own, to read its fields (assert_test measures a copy)
        raised = None
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    outcome = "passed"
    try:
        assert_test(case, [DebateFactualityMetric(base_url=os.environ["JUDGE_URL"], model="fake-model")])
    except BaseException as exc:
        outcome = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with open(os.environ["OUTCOMES"], "a") as fh:
            fh.write(json.dumps({"name": name, "outcome": outcome, "raised": raised, "score": measured.score,
                                 "reason": measured.reason, "error": measured.error,
                                 "success": measured.is_successful()}) + "\\n")


def test_france() -> None:
    check("France", "Paris")


def test_italy() -> None:
    check("Italy", "Milan")


def test_spain() -> None:
    check("Spain", "Madrid")
"""


def _judge(call: Call) -> Reply:
    """Knows Paris; its replies about Spain are never usable (a judge that breaks on one case)."""
    if any("Spain" in message["content"] for message in call.body["messages"]):  # re-asks included
        return Reply(content="{not json")
    right = "Answer: Paris" in call.asked
    return Reply(content=op(right, 0 if right else 4, "checked against the context"))


ROUTES: dict[str, Route] = {"debate": _judge}


def test_metric_passes_and_fails_the_right_cases_under_deepeval_test_run(tmp_path: Path) -> None:
    need("deepeval")
    (tmp_path / "test_capitals.py").write_text(USER_TESTS)
    outcomes = tmp_path / "outcomes.jsonl"
    with FakeOpenAI(routes=ROUTES) as server:
        env = {
            **cli_env(),
            "JUDGE_URL": server.base_url,
            "OUTCOMES": str(outcomes),
            "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
            "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
        }
        executable = shutil.which("deepeval") or "deepeval"
        done = subprocess.run(
            [executable, "test", "run", "test_capitals.py"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            cwd=tmp_path,
        )
    assert done.returncode == 1, done.stdout[-3000:]
    found = {r["name"]: r for r in map(json.loads, outcomes.read_text().splitlines())}
    assert found["France"]["outcome"] == "passed" and found["France"]["score"] == 1.0 and found["France"]["success"]
    assert found["Italy"]["outcome"].startswith("AssertionError") and found["Italy"]["score"] < 0.5
    assert found["Italy"]["reason"].startswith("non_factual: ")
    spain = found["Spain"]
    assert spain["score"] is None and spain["success"] is False  # never a silent score
    assert spain["raised"].startswith("NoVerdictError: the debate reached no verdict")
    assert "reached no verdict" in spain["error"] and spain["outcome"] != "passed"
