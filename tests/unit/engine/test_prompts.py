from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agents.team import AutogenTeamFactory
from debate.calls import PromptError, load_prompt
from debate.engine import load_chain
from tests.support.helpers import ROOT


@pytest.mark.parametrize("role", ["trust", "skeptic", "leader"])
def test_tuned_role_prompts_open_with_their_role(role: str) -> None:
    prompt = load_prompt(role, "tuned")
    assert prompt.system.startswith(f"You are the {role.capitalize()} agent among three agents.")
    assert '"Error severity"' in prompt.user and "0 - no error" in prompt.system and "5 - severe" in prompt.system


def test_initial_prompt_names_no_debate_role() -> None:
    for prompt_set in ("paper", "tuned"):
        prompt = load_prompt("initial", prompt_set)
        text = (prompt.system + prompt.user).lower()
        for role in ("trust", "skeptic", "leader"):
            assert role not in text
        assert '"Error severity"' in prompt.user


def _text(name: str, prompt_set: str = "paper") -> str:
    prompt = load_prompt(name, prompt_set)
    return " ".join((prompt.system + "\n" + prompt.user).split())


def test_the_tuned_set_is_kept_as_it_was() -> None:
    assert "Do not disagree for its own sake" in _text("skeptic", "tuned")
    assert "A claim with severity 0 or 1 is factual" in _text("leader", "tuned")
    assert load_prompt("trust", "paper").sha256 != load_prompt("trust", "tuned").sha256


def test_a_directory_set_falls_back_to_the_paper_set(tmp_path: Path) -> None:
    (tmp_path / "skeptic.toml").write_text(
        'variables = ["claim", "evidence", "previous"]\nsystem = "Be skeptical."\nuser = "$claim $evidence $previous"\n'
    )
    assert load_prompt("skeptic", str(tmp_path)).system == "Be skeptical."
    assert load_prompt("trust", str(tmp_path)).sha256 == load_prompt("trust", "paper").sha256
    with pytest.raises(PromptError, match="neither a packaged set"):
        load_prompt("trust", str(tmp_path / "missing"))


def test_hash_is_sha256_of_the_file() -> None:
    prompt = load_prompt("reask")
    assert prompt.sha256 == hashlib.sha256((ROOT / "prompts" / "reask.toml").read_bytes()).hexdigest()


def test_the_severity_rubric_is_one_file_included_where_needed(tmp_path: Path) -> None:
    for prompt_set in ("paper", "tuned"):
        rubric = (ROOT / "prompts" / prompt_set / "severity_rubric.txt").read_text().rstrip("\n")
        for name in ("initial", "trust", "skeptic", "leader"):
            assert "0 - no error" not in (ROOT / "prompts" / prompt_set / f"{name}.toml").read_text()
            prompt = load_prompt(name, prompt_set)
            system, _ = prompt.render(**dict.fromkeys(prompt.variables, "x"))
            assert rubric in system
    # The hash covers the included text: editing the rubric changes every including prompt's hash.
    (tmp_path / "leader.toml").write_bytes((ROOT / "prompts" / "paper" / "leader.toml").read_bytes())
    paper_rubric = (ROOT / "prompts" / "paper" / "severity_rubric.txt").read_text()
    (tmp_path / "severity_rubric.txt").write_text(paper_rubric.replace("0 - no error", "0 - none at all"))
    assert load_prompt("leader", str(tmp_path)).sha256 != load_prompt("leader").sha256
    assert "0 - none at all" in load_prompt("leader", str(tmp_path)).render(claim="c", evidence="e", opinions="o")[0]


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
    (tmp_path / "trust.toml").write_text('variables = ["claim", "evidence"]\nsystem = "x"\nuser = "$claim $evidence"\n')
    with pytest.raises(PromptError, match=r"role trust, sees previous.*the agent supplies"):
        AutogenTeamFactory(prompts_dir=str(tmp_path)).prompt_hashes(load_chain("true-to-skeptic"))
