"""The pieces of a composed team's calibration that need no debate: `--team`'s reader (every generated spec either
gives each role of the chain its model, the same as the spec says, or is refused naming what is wrong), the file's
limits (a composed file is version 5, and only a composed file holds more than 3 classes), and the line that says
what a composition assumes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.calibration import Calibration, ComposedPart, Independence
from debate.errors import UsageError
from experiments.dynamics.compose import parse_team
from tests.support.properties import Reached

ROLES = ("initial", "trust", "skeptic", "leader")
_NAME = st.sampled_from(["weak", "weak", "strong", "strong", "gpt-4o@127.0.0.1:8", "leader", ""])
_NAMED = st.tuples(st.sampled_from([*ROLES, *ROLES, "judge", " skeptic"]), _NAME).map(lambda e: f"{e[0]}={e[1]}")
_ROLES_ONCE = st.lists(_NAMED, max_size=5, unique_by=lambda e: e.split("=", 1)[0].strip())
_ENTRIES = st.tuples(st.lists(_NAME, min_size=1, max_size=2), _ROLES_ONCE | st.lists(_NAMED, max_size=5)).flatmap(
    lambda parts: st.permutations(parts[0] + parts[1])
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # `reached` counts across the examples
@given(entries=_ENTRIES)
def test_a_team_spec_gives_every_role_its_model_or_is_refused(entries: list[str], reached: Reached) -> None:
    reached.require(accepted=0.05, refused=0.2)  # accepted: 15 to 25 of 100 examples in three runs
    spec = ",".join(entries)
    try:
        team = parse_team(spec, ROLES)
    except UsageError as exc:
        reached("refused")
        assert str(exc).startswith("--team")
        return
    reached("accepted")
    assert list(team) == list(ROLES)
    bare = [e.strip() for e in entries if "=" not in e]
    roles = [e.split("=", 1)[0].strip() for e in entries if "=" in e]
    assert len(roles) == len(set(roles)), spec  # a role given twice is refused, never the last one taken
    named = {e.split("=", 1)[0].strip(): e.split("=", 1)[1].strip() for e in entries if "=" in e}
    for role in ROLES:
        # a role named takes its entry's model; every other role the one bare name
        assert team[role] == named.get(role, bare[0] if bare else None)
        assert team[role]


def test_a_role_given_twice_is_refused_naming_both_models() -> None:
    with pytest.raises(UsageError, match=r"--team: leader is given twice \(strong and weak\)"):
        parse_team("weak,leader=strong,leader=weak", ROLES)


def test_a_spec_naming_no_model_for_a_role_says_which() -> None:
    with pytest.raises(UsageError, match="names no model for initial, trust"):
        parse_team("skeptic=strong,leader=strong", ROLES)
    with pytest.raises(UsageError, match="the chain has no role 'judge'"):
        parse_team("weak,judge=strong", ROLES)


def _file(classes: int, version: int, composed: list[ComposedPart]) -> dict[str, Any]:
    return {
        "version": version,
        "fitted_on": {
            "model": "weak",
            "prompts": {},
            "chain": "true-to-skeptic",
            "chain_sha256": "0" * 64,
            "min_rounds": 2,
            "max_rounds": 5,
            "claims": 10,
            "turns": 80,
            "factual_share": 0.5,
            "runs": ["a.jsonl"],
        },
        "classes": [{"counts": []}] * classes,
        "shares": {"factual": [1 / classes] * classes, "hallucinated": [1 / classes] * classes},
        "model_reason": "r",
        "calls_per_turn": 1.0,
        "checks": [],
        "not_calibrated": [],
        "composed": [c.model_dump() for c in composed],
    }


def _part(model: str, roles: list[str]) -> ComposedPart:
    return ComposedPart(
        model=model, roles=roles, classes=3, claims=10, turns=40, factual_share=0.5, model_reason="r", runs=["a"]
    )


def test_only_a_composed_file_holds_more_than_three_classes() -> None:
    with pytest.raises(ValueError, match="4 classes: a fit has at most 3"):
        Calibration.model_validate(_file(4, 4, []))
    parts = [_part("weak", ["initial", "trust"]), _part("strong", ["skeptic", "leader"])]
    assert len(Calibration.model_validate(_file(9, 5, parts)).classes) == 9
    with pytest.raises(ValueError, match="a composed calibration is version 5"):
        Calibration.model_validate(_file(9, 4, parts))
    with pytest.raises(ValueError, match="10 classes"):
        Calibration.model_validate(_file(10, 5, parts))


def _said(parts: list[ComposedPart], tests: list[Independence]) -> str | None:
    data = _file(9 if parts else 1, 5 if parts else 4, parts) | {"independence": [t.model_dump() for t in tests]}
    return Calibration.model_validate(data).composition_assumption()


def test_what_a_composition_assumes_is_said_with_its_test() -> None:
    parts = [_part("weak", ["initial", "trust"]), _part("strong", ["skeptic", "leader"])]
    assert _said([], []) is None
    untested = str(_said(parts, []))
    assert untested.startswith("composed from separate fits of weak (initial, trust) and strong (skeptic, leader)")
    assert "not tested" in untested
    held = Independence(models=("weak", "strong"), claims=300, statistic=3.0, df=8, p_value=0.9, rejected=False)
    assert "(not rejected for weak and strong on 300 claims they both debated)" in str(_said(parts, [held]))
    # Three models are three pairs: one pair's test is said as that pair's, and the two untested are said.
    three = [*parts, _part("third", [])]
    said = str(_said(three, [held]))
    assert "not rejected for weak and strong on 300 claims" in said
    assert "2 of 3 model pairs not tested" in said
    failed = held.model_copy(update={"p_value": 1e-9, "rejected": True})
    assert "not rejected" not in str(_said(parts, [failed]))
    calibration = Calibration.model_validate(
        _file(9, 5, parts) | {"independence": [failed.model_dump()], "not_calibrated": ["associated"]}
    )
    assert not calibration.calibrated
    warning = str(calibration.warning())
    assert warning.startswith("p_factual is not calibrated: associated; composed from separate fits")
