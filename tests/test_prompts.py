from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agents.team import AutogenTeamFactory
from debate.prompts import PromptError, load_prompt

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("role", ["trust", "skeptic", "leader"])
def test_debate_role_prompts_open_with_their_role(role: str) -> None:
    prompt = load_prompt(role)
    assert prompt.system.startswith(f"You are the {role.capitalize()} agent among three agents.")
    assert '"Error severity"' in prompt.user and "0 - no error" in prompt.system and "5 - severe" in prompt.system


def test_initial_prompt_names_no_debate_role() -> None:
    prompt = load_prompt("initial")
    text = (prompt.system + prompt.user).lower()
    for role in ("trust", "skeptic", "leader"):
        assert role not in text
    assert '"Error severity"' in prompt.user


def test_hash_is_sha256_of_the_file() -> None:
    prompt = load_prompt("leader")
    assert prompt.sha256 == hashlib.sha256((ROOT / "prompts" / "leader.toml").read_bytes()).hexdigest()


def test_missing_or_unexpected_variable_fails_loudly() -> None:
    prompt = load_prompt("trust")
    with pytest.raises(PromptError, match=r"missing variables \['previous'\]"):
        prompt.render(claim="c", evidence="e")
    with pytest.raises(PromptError, match=r"unexpected variables \['extra'\]"):
        prompt.render(claim="c", evidence="e", previous="p", extra="x")


def test_render_keeps_dollar_and_braces_in_values() -> None:
    system, user = load_prompt("initial").render(claim="costs $5 {approx}", evidence="[1] $HOME")
    assert "costs $5 {approx}" in user and "[1] $HOME" in user and system


def _write(tmp_path: Path, name: str, body: str) -> str:
    (tmp_path / f"{name}.toml").write_text(body)
    return str(tmp_path)


def test_undeclared_variable_in_file_is_rejected(tmp_path: Path) -> None:
    directory = _write(tmp_path, "p1", 'variables = ["a"]\nuser = "$a and $b"\n')
    with pytest.raises(PromptError, match=r"declared variables \['a'\] differ from those used \['a', 'b'\]"):
        load_prompt("p1", directory)


def test_bad_toml_and_missing_file_name_the_file(tmp_path: Path) -> None:
    directory = _write(tmp_path, "p2", "user = ")
    with pytest.raises(PromptError, match=r"p2.toml: not valid TOML"):
        load_prompt("p2", directory)
    with pytest.raises(PromptError, match="not found"):
        load_prompt("nope", directory)


def test_team_factory_checks_role_variables(tmp_path: Path) -> None:
    for name in ("initial", "trust", "skeptic", "leader", "reask"):
        (tmp_path / f"{name}.toml").write_bytes((ROOT / "prompts" / f"{name}.toml").read_bytes())
    (tmp_path / "trust.toml").write_text('variables = ["claim", "evidence"]\nsystem = "x"\nuser = "$claim $evidence"\n')
    with pytest.raises(PromptError, match="the trust agent supplies"):
        AutogenTeamFactory(prompts_dir=str(tmp_path))
