"""The inspect_ai scorer under real `inspect eval` runs (the inspect CLI, in its own process), with a scripted
judge on 127.0.0.1: the model under test answers through inspect's OpenAI-compatible provider from the same
scripted server, and the debate judges each answer. Also HaluEval as an inspect task on the fixture data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import ROOT, cli_env, op
from tests.support.phoenix import need

pytestmark = [pytest.mark.inspect, pytest.mark.slow]

TASK_FILE = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate
from debate.integrations.inspect_ai import debate_scorer

KNOWLEDGE = "Paris is the capital of France. Rome is the capital of Italy."


@task
def capitals(judge_url: str) -> Task:
    return Task(
        dataset=[
            Sample(id="france", input="What is the capital of France?", metadata={"reference": KNOWLEDGE}),
            Sample(id="italy", input="What is the capital of Italy?", metadata={"reference": KNOWLEDGE}),
            Sample(id="spain", input="What is the capital of Spain?", metadata={"reference": KNOWLEDGE}),
        ],
        solver=generate(),
        scorer=debate_scorer(base_url=judge_url, model="fake-model"),
    )
"""


def _answer(call: Call) -> Reply:
    """The model under test: right about France, wrong about Italy, and something for Spain."""
    asked = call.asked
    return Reply(content="Paris" if "France" in asked else "Milan" if "Italy" in asked else "Madrid")


def _judge(call: Call) -> Reply:
    """A judge that knows Paris and Rome are capitals."""
    right = "Answer: Paris" in call.asked or "Answer: Rome" in call.asked
    return Reply(content=op(right, 0 if right else 4, "checked against the knowledge"))


ROUTES: dict[str, Route] = {"*": _answer, "debate": _judge, "debate@spain": lambda call: Reply(content="{not json")}


def _inspect(tmp_path: Path, *args: str, env: dict[str, str]) -> dict[str, Any]:
    executable = shutil.which("inspect") or "inspect"
    logs = tmp_path / "logs"
    command = [executable, "eval", *args, "--log-dir", str(logs), "--log-format", "json", "--display", "none"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = list(logs.glob("*.json"))
    data: dict[str, Any] = json.loads(log.read_text())
    return data


def _scores(log: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(s["id"]): s["scores"]["debate_scorer"] for s in log["samples"]}


def _metrics(log: dict[str, Any]) -> dict[str, float]:
    # One entry per reducer: the unverifiable metric reads the unreduced scores, so it has an entry of its own.
    return {name: m["value"] for result in log["results"]["scores"] for name, m in result["metrics"].items()}


def test_debate_scorer_in_a_real_inspect_eval(tmp_path: Path) -> None:
    need("inspect_ai")
    (tmp_path / "capitals.py").write_text(TASK_FILE)
    with FakeOpenAI(routes=ROUTES) as server:
        env = {**cli_env(), "FAKE_BASE_URL": server.base_url, "FAKE_API_KEY": "unused"}
        log = _inspect(
            tmp_path,
            "capitals.py",
            "--model",
            "openai-api/fake/fake-model",
            "-T",
            f"judge_url={server.base_url}",
            env=env,
        )
    scores = _scores(log)
    assert scores["france"]["value"] == "C" and scores["italy"]["value"] == "I"
    assert scores["italy"]["answer"] == "Milan" and scores["italy"]["explanation"].startswith("non_factual: ")
    assert scores["italy"]["metadata"]["verdict"] == "non_factual"
    assert scores["italy"]["metadata"]["report"]["claims"][0]["debate"]["states"]  # the transcript rides along
    # An unusable judge reply is never a verdict: N, said to be the grader's failure.
    assert scores["spain"]["value"] == "N" and scores["spain"]["metadata"]["verdict"] == "unverifiable"
    assert scores["spain"]["reason"] == "grader_failed" and "unverifiable" in scores["spain"]["explanation"]
    metrics = _metrics(log)
    assert metrics["accuracy"] == pytest.approx(1 / 3) and metrics["unverifiable"] == pytest.approx(1 / 3)


def _fixture_answers() -> dict[str, str]:
    lines = (ROOT / "tests" / "fixtures" / "data" / "halueval" / "qa_data.jsonl").read_text().splitlines()
    return {json.loads(line)["question"]: json.loads(line)["right_answer"] for line in lines}


def test_halueval_as_an_inspect_task(tmp_path: Path) -> None:
    need("inspect_ai")
    right = _fixture_answers()

    def judge(call: Call) -> Reply:
        """Knows each question's right answer (a perfect detector), except on one item, where it always says
        true: the hallucinated answer there must be scored wrong."""
        said = next((answer for question, answer in right.items() if question in call.asked), None)
        ok = said is not None and f"Answer: {said}" in call.asked
        return Reply(content=op(ok or call.item == "halueval-qa-3", 0, "checked"))

    with FakeOpenAI(routes={"debate": judge}) as server:
        # The installed package's entry point names the task; no PYTHONPATH (inspect reads a task's package from
        # the distribution first on sys.path, and a source tree's egg-info would hide the editable install's).
        log = _inspect(
            tmp_path,
            "markov_debate/halueval",
            "--model",
            "mockllm/model",
            "-T",
            "task=qa",
            "-T",
            "n=8",
            "-T",
            "seed=1",
            "-T",
            f"data_dir={ROOT / 'tests' / 'fixtures' / 'data'}",
            "-T",
            f"base_url={server.base_url}",
            "-T",
            "model=fake-model",
            env=cli_env(),
        )
    scores = _scores(log)
    targets = {str(s["id"]): s["target"] for s in log["samples"]}
    assert len(scores) == 8
    for item, score in scores.items():
        fooled = item == "halueval-qa-3" and targets[item] == "non_factual"
        assert score["value"] == ("I" if fooled else "C"), (item, score)
    assert _metrics(log)["unverifiable"] == 0.0
