"""`debate guard`'s refusals: each one line, exit 2, before anything is bound or opened."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import cli_env

pytestmark = pytest.mark.slow


def _guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    env.pop("DEBATE_GUARD_UPSTREAM", None)
    env["DEBATE_DESK_DB"] = f"sqlite:///{cwd / 'desk.sqlite'}"
    return subprocess.run(["debate", "guard", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "--upstream: give the endpoint answers come from"),
        (("--upstream", "ftp://x"), "upstream: String should match pattern"),
        (("--upstream", "http://127.0.0.1:9/v1", "--host", "0.0.0.0"), "exposes the guard beyond this machine"),
        (("--upstream", "http://127.0.0.1:9/v1", "--policy", "deny"), "invalid choice: 'deny'"),
        (("--upstream", "http://127.0.0.1:9/v1", "--guard-config", "missing.toml"), "missing.toml"),
        (("--upstream", "http://127.0.0.1:9/v1", "--guard-config", "bad.toml"), "routes.legal.policy"),
        (("--upstream", "http://127.0.0.1:9/v1", "--check-timeout", "0"), "check_timeout_s"),
    ],
)
def test_a_bad_start_is_one_line(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    (tmp_path / "bad.toml").write_text('[routes.legal]\npolicy = "deny"\n', encoding="utf-8")
    done = _guard(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert said in lines[-1] and "Traceback" not in done.stderr, done.stderr
    if "invalid choice" not in said:  # argparse's own refusals come with the usage line
        assert len(lines) == 1, done.stderr


def test_the_brief_help_shows_the_flags_a_guard_needs_to_start(capsys: pytest.CaptureFixture[str]) -> None:
    """`debate guard --help` lists the guard's own flags first, with their choices, before the judge's."""
    from debate.cli import main

    with pytest.raises(SystemExit) as done:
        main(["guard", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    flags = ["--upstream URL", "--port PORT", "--policy annotate|flag|block", "--on-failure open|closed", "--stream"]
    places = [shown.find(flag) for flag in flags]
    assert -1 not in places, shown
    assert max(places) < shown.find("--model.base-url") and "--help-all" in shown
