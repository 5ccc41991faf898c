"""The desk with a team: a model per role runs the desk's audits, each audit shows the team behind it, and every
endpoint's key stays out of what the desk stores, returns or logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from debate.config import RoleConfig, RoleModelConfig
from tests.support.desk import ThreadedDesk, api_keys, settings_for, wait_done
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op

AUDIT = {"question": "Capital of France?", "response": "Paris.", "reference": "Paris is the capital of France."}


def test_an_audit_names_its_team_and_each_roles_model_speaks_its_turns(tmp_path: Path, model: FakeOpenAI) -> None:
    def agrees(call: Call) -> Reply:
        return Reply(content=op(True))

    with FakeOpenAI(routes={"debate:leader": agrees}, models=("strong-1",)) as strong:
        settings = settings_for(f"sqlite:///{tmp_path}/t.sqlite", model.base_url, keys=api_keys())
        leader = RoleConfig(
            model=RoleModelConfig(base_url=strong.base_url, model="strong-1", api_key="sk-leader-secret-4567")
        )
        verifier = settings.verifier.model_copy(update={"roles": {"leader": leader}})
        settings = settings.model_copy(update={"verifier": verifier, "price_prompt_per_mtok": 1.0})
        assert "sk-leader-secret-4567" in settings.secrets()
        with ThreadedDesk(settings) as desk:
            root = desk.client("root")
            made = root.post("/v1/audits", json=AUDIT).json()["id"]
            done = wait_done(root, made)
            page = root.get(f"/audits/{made}", headers={"Accept": "text/html"}).text
            dashboard = root.get("/dashboard", headers={"Accept": "text/html"}).text
    assert done["status"] == "done", done
    assert done["report"]["meta"]["roles"] == {"leader": "strong-1"}
    assert "leader on strong-1" in page
    # The desk prices tokens at its one price: with a model per role, its cost figures say so where they stand.
    for shown in (page, dashboard):
        assert "(every model's tokens at the desk's one --price-prompt / --price-completion)" in shown
    assert strong.purposes and set(strong.purposes) == {"debate:leader"}
    assert "debate:leader" not in model.purposes
    assert all(h.get("authorization") == "Bearer sk-leader-secret-4567" for h in strong.headers)
    assert "sk-leader-secret-4567" not in str(done)


async def test_a_per_audit_override_keeps_each_cascade_teams_own_models(tmp_path: Path) -> None:
    """An audit with overrides runs on a Verifier sharing the worker's clients: the cascade's later team still
    speaks through its own model, not the first team's."""
    from debate import DebateConfig, Verifier, VerifierConfig
    from debate.plugins import TaskInput
    from debate.testing import ScriptedChatClient
    from markov_debate.desk.overrides import OverrideVerifiers
    from markov_debate.desk.requests import AuditOverrides
    from tests.support.calibration import calibration

    weak_file, strong_file = tmp_path / "weak.json", tmp_path / "strong.json"
    weak_file.write_text(calibration(model="weak").model_dump_json())
    strong_file.write_text(calibration(model="strong").model_dump_json())
    team = {"name": "strong", "model": {"model": "strong"}, "calibration": str(strong_file), "max_rounds": 2}
    debate = DebateConfig(min_rounds=1, max_rounds=1, calibration=str(weak_file), stop="cascade:0.9", cascade=[team])
    weak = ScriptedChatClient({"debate": [op(v) for v in [True, False, True, False]]}, model="weak")
    strong = ScriptedChatClient({"debate": [op(True)] * 6}, model="strong")
    item = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")
    async with Verifier(config=VerifierConfig(debate=debate), client=weak, cascade_clients={"strong": strong}) as base:
        pool = OverrideVerifiers(base, 2)
        async with pool.lease(AuditOverrides(rollup="strict")) as other:
            report = await other.verify(item)
        await pool.aclose()
    claim = report.claims[0].debate
    assert claim is not None and [t.name for t in claim.teams] == ["first", "strong"]
    spoken = [t.call.model for s in claim.states for t in s.turns]
    assert spoken[:4] == ["weak"] * 4 and set(spoken[4:]) == {"strong"}
    assert strong.calls and report.rollup == "strict"


def test_an_overriding_chain_that_lacks_a_role_the_server_gives_a_model_is_refused(tmp_path: Path) -> None:
    from debate.config import VerifierConfig
    from debate.errors import InputError
    from markov_debate.desk.requests import AuditRequest
    from markov_debate.desk.runnable import check_runnable

    (tmp_path / "checker.toml").write_text(
        'variables = ["claim", "evidence", "previous"]\nsystem = "You check dates."\n'
        'user = "$evidence $claim $previous"\n'
    )
    chain = tmp_path / "with-checker.toml"
    chain.write_text(
        'name = "with-checker"\n[states]\nS0 = ["initial"]\nS1 = ["trust", "checker", "skeptic", "leader"]\n'
        '[transitions."*"]\ntrue = "S1"\nfalse = "S1"\n[roles.checker]\nprompt = "checker.toml"\nsees = "previous"\n'
    )
    server = VerifierConfig.model_validate(
        {"debate": {"chain": str(chain)}, "roles": {"checker": {"model": {"model": "strong-1"}}}}
    )
    request = AuditRequest.model_validate({**AUDIT, "overrides": {"chain": "true-to-skeptic"}})
    with pytest.raises(InputError, match=r"overrides\.chain: roles\.checker: the chain 'true-to-skeptic' has no role"):
        check_runnable(request, request.overrides.apply(server), max_claim_chars=None)
