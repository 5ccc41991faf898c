"""Extension by installed package: a task and a prefilter from tests/plugins, installed with pip into a temporary
folder and used through the `debate` command, with no change to the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import PLUGINS, op

pytestmark = pytest.mark.slow  # starts processes

PLUGINS = PLUGINS


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    # Built from copies, so the build leaves nothing in the source tree.
    sources = tmp_path_factory.mktemp("plugins")
    for name in ("headline_task", "numbers_prefilter"):
        shutil.copytree(PLUGINS / name, sources / name)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(sources / "headline_task"),
            str(sources / "numbers_prefilter"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "mdp_headline").is_dir() and any(target.glob("mdp_numbers-*.dist-info"))
    return target


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True, 0, "matches the evidence"))}) as server:
        yield server


def _debate(args: list[str], plugin_path: Path | None, endpoint: FakeOpenAI) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "DEBATE_MODEL", "PYTHONPATH")}
    env["OPENAI_BASE_URL"] = endpoint.base_url
    if plugin_path is not None:
        env["PYTHONPATH"] = str(plugin_path)
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", "verify", *args, "--debate.min-rounds", "0", "--debate.max-rounds", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


ANSWER = "The Eiffel Tower is 330 metres tall. It was the tallest structure for 41 years."
EVIDENCE = "The Eiffel Tower is 330 metres (1,083 ft) tall."


def test_an_installed_task_is_used_through_the_cli(plugin_path: Path, endpoint: FakeOpenAI) -> None:
    done = _debate(["--task", "headline", "--answer", ANSWER, "--evidence", EVIDENCE, "--json"], plugin_path, endpoint)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["task"] == "headline" and report["extraction"]["method"] == "headline"
    assert [c["text"] for c in report["claims"]] == ["The Eiffel Tower is 330 metres tall."]
    assert report["verdict"] == "factual" and report["note"] == "only the headline was checked"
    assert report["claims"][0]["evidence"][0]["text"] == EVIDENCE
    assert len(endpoint.requests) == 1  # S0 only (min and max rounds 0)
    shown = _debate(["--help"], plugin_path, endpoint).stdout
    assert "headline" in shown and "numbers" in shown  # CLI choices and help come from the registries


def test_an_installed_prefilter_decides_before_the_debate(plugin_path: Path, endpoint: FakeOpenAI) -> None:
    args = ["--task", "headline", "--answer", "The Eiffel Tower is 512 metres tall.", "--evidence", EVIDENCE]
    done = _debate([*args, "--prefilter.prefilters", "numbers", "--json"], plugin_path, endpoint)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [claim] = report["claims"]
    assert claim["decided_by"] == "prefilter:numbers" and claim["factual"] is False
    assert claim["prefilters"][0]["reason"] == "number(s) 512 appear in no evidence"
    assert report["prefilter"]["prefilters"] == ["numbers"] and report["prefilter"]["decided"] == 1
    assert endpoint.requests == []  # decided without a model call


def test_an_installed_prefilter_brings_its_own_options(plugin_path: Path, endpoint: FakeOpenAI) -> None:
    args = [
        "--task",
        "headline",
        "--answer",
        "The Eiffel Tower is 512 metres tall.",
        "--evidence",
        EVIDENCE,
        "--prefilter.prefilters",
        "numbers",
        "--json",
    ]
    done = _debate([*args, "--prefilter.options", "numbers.min_digits=4"], plugin_path, endpoint)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["claims"][0]["decided_by"] == "debate" and endpoint.purposes == ["debate:initial"]
    assert report["meta"]["config"]["prefilter"]["options"] == {"numbers": {"min_digits": 4}}
    typo = _debate([*args, "--prefilter.options", "numbers.min_digit=4"], plugin_path, endpoint)
    assert typo.returncode == 2 and "prefilter.options.numbers: min_digit: Extra inputs are not permitted" in (
        typo.stderr
    )
    unlisted = _debate([*args[:-3], "--prefilter.options", "numbers.min_digits=4"], plugin_path, endpoint)
    assert unlisted.returncode == 2 and "options for prefilter 'numbers', which is not listed" in unlisted.stderr


def test_without_the_package_the_names_are_unknown(endpoint: FakeOpenAI) -> None:
    done = _debate(["--task", "headline", "--answer", ANSWER], None, endpoint)
    assert done.returncode == 2 and "invalid choice: 'headline'" in done.stderr
    done = _debate(["--answer", ANSWER, "--prefilter.prefilters", "numbers"], None, endpoint)
    assert done.returncode == 2 and "unknown prefilter 'numbers'" in done.stderr
