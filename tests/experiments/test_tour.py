"""`debate tour --simulated`: a debate between agents of stated accuracies, no model started, every verdict marked
simulated and every opinion saying how it was drawn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import cli_env

pytestmark = pytest.mark.slow  # starts processes


def _tour(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", "tour", "--simulated", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env() | {"COLUMNS": "200"},
    )


def test_the_simulated_tour_debates_a_wrong_and_a_right_answer_and_says_simulated() -> None:
    done = _tour()
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.count("verdict: SIMULATED agents, not a model") == 2
    assert "each verdict is drawn at these stated rates" in text
    assert text.count("model: simulated") == 2 and "embedded" not in done.stderr  # no model was started
    # the default population is seeded so that the first debate shows the chain recovering from a fooled S0
    first = text.split("model: simulated")[0]
    assert "chain: S0 (initial said true -> S2)  S2 (leader said false -> S1)" in first
    assert "NON_FACTUAL" in first and "(truly wrong)" in first
    assert "[simulated skeptic] says false: drawn at its stated rates" in first


def test_a_roles_file_sets_the_population(tmp_path: Path) -> None:
    roles = tmp_path / "roles.toml"
    roles.write_text("seed = 1\n[roles.initial]\nfactual_true = 1.0\nhallucinated_true = 1.0\n")
    done = _tour("--population", str(roles), "--debate.min-rounds", "0")
    assert done.returncode == 0, done.stderr
    assert "(seed 1)" in done.stdout and done.stdout.count("chain: S0") == 2
    assert done.stdout.count("FACTUAL  score") == 2  # an initial agent that always says true, and no debate after it
    bad = _tour("--population", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.toml" in bad.stderr
