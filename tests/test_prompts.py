from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agents.team import AutogenTeamFactory
from debate.chain import load_chain
from debate.prompts import PromptError, load_prompt

ROOT = Path(__file__).resolve().parent.parent


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


PAPER_SHARED = [
    "You are one of three agents: Trust, Skeptic and Leader.",
    "First analyse the earlier opinion(s): say which parts are right and which are wrong, and why.",
    "Then judge the claim against the evidence. Every point of your view must be backed by the evidence.",
    "Do not repeat or copy an earlier opinion. Use it only as a reference and develop a view of your own.",
    'your reply must start with "{"',
    '{"opinion": "<your analysis, then your judgment>", "factuality": True or False, "Error severity":',
    "Factuality and error severity are two separate judgments: give each one on its own.",
]
PAPER_SCALE = [
    "0 - no error: the claim is fully consistent with the facts.",
    "1 - minor error: small mistakes that do not change the essence of the claim, such as a typo, a wrong date or a "
    "small numeric difference.",
    "2 - moderate error:", "a wrong term, a misused statistic or a slight departure from the evidence.",
    "3 - significant error:",
    "a large exaggeration or understatement, misused expert authority or a distorted context.",
    "4 - severe error: the claim is negated or invalidated because the evidence fundamentally contradicts it",
    "5 - false: the claim is entirely made up or deliberately misleading", "invented events, people or statements.",
]  # fmt: skip
PAPER_ROLES = {
    "trust": ["trust the previous agent's opinion as much as possible and build on it",
              "Check whether the evidence supports each of its statements",
              "extend the parts you judge to be accurate"],
    "skeptic": ["doubt the previous agent's opinion as much as possible",
                "errors, misleading parts, bias or inconsistencies",
                "point out what is wrong in the previous agent's opinion and why"],
    "leader": ["the Trust agent believes the previous agent's opinion as readily as possible",
               "the Skeptic agent doubts it as readily as possible", "taking these dispositions into account",
               "Judge the strengths and weaknesses of each side against the evidence",
               "the most accurate and reliable conclusion of your own"],
}  # fmt: skip


@pytest.mark.parametrize("role", ["trust", "skeptic", "leader"])
def test_paper_set_carries_every_instruction_of_tables_6_to_8(role: str) -> None:
    text = _text(role)
    for instruction in [*PAPER_SHARED, *PAPER_SCALE, *PAPER_ROLES[role]]:
        assert instruction in text, instruction
    # No invented rules: no length cap, no rule tying factuality to severity, no "do not disagree" softening.
    lowered = text.lower()
    for absent in ("at most three sentences", "severity 0 or 1 is factual", "for its own sake"):
        assert absent not in lowered
    # Table 12: the first and second speakers see "the previous agent's response"; the Leader both, by role name.
    assert ("$opinions" if role == "leader" else "Here is the previous agent's response: $previous") in text


def test_paper_subjective_filter_follows_table_9() -> None:
    text = _text("subjective_filter")
    assert "Delete only the sentences that are entirely personal opinion and carry no factual content." in text
    assert "Output every remaining sentence exactly as it is in the original, unchanged and in order." in text
    assert "If every sentence is personal opinion, output None." in text
    assert "Let me know if you would like more recommendations. Output: None" in text
    assert "Have you read it? Output: The Name of the Wind is a fantasy novel." in text


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
