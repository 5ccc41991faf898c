"""The desk with a team: a model per role runs the desk's audits, each audit shows the team behind it, and every
endpoint's key stays out of what the desk stores, returns or logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from debate.config import RoleConfig, RoleModelConfig
from debate.types import Report
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
            model=RoleModelConfig(
                base_url=strong.base_url,
                model="strong-1",
                api_key="sk-leader-secret-4567",
                price_in=10.0,
                price_out=20.0,
            )
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
    # Each model at its own price, as the command line prices a run: the desk's model at the desk's price ($1 in,
    # $0 out), the leader at its own ($10 in, $20 out).
    report = Report.model_validate(done["report"])
    by_model = report.usage_by_model()
    spoke, rest = by_model["strong-1"], by_model[report.meta.model]
    expected = (rest.prompt_tokens * 1.0 + spoke.prompt_tokens * 10.0 + spoke.completion_tokens * 20.0) / 1e6
    assert done["cost_per_model"] is True and done["cost"] == pytest.approx(expected)
    for shown in (page, dashboard):
        assert "(each model at its own price: the desk's for its model" in shown
        assert f"cost ${expected:.4f}" in shown
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


def test_an_audit_whose_team_has_a_model_without_a_price_says_it_was_priced_at_the_desks_one(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    def agrees(call: Call) -> Reply:
        return Reply(content=op(True))

    with FakeOpenAI(routes={"debate:leader": agrees}, models=("unlisted-1",)) as strong:
        settings = settings_for(f"sqlite:///{tmp_path}/t.sqlite", model.base_url, keys=api_keys())
        leader = RoleConfig(model=RoleModelConfig(base_url=strong.base_url, model="unlisted-1"))
        verifier = settings.verifier.model_copy(update={"roles": {"leader": leader}})
        settings = settings.model_copy(update={"verifier": verifier, "price_prompt_per_mtok": 1.0})
        with ThreadedDesk(settings) as desk:
            root = desk.client("root")
            done = wait_done(root, root.post("/v1/audits", json=AUDIT).json()["id"])
            dashboard = root.get("/dashboard", headers={"Accept": "text/html"}).text
            stats = root.get("/v1/stats").json()
    # No price for the leader's model: not a silent $0 for its tokens, but every token at the desk's one price, said.
    assert done["cost_per_model"] is False
    assert done["cost"] == pytest.approx((done["prompt_tokens"] * 1.0) / 1e6)
    assert stats["flat_priced"] == 1
    assert "(1 audit(s) with every model's tokens at the desk's one --price-prompt / --price-completion" in dashboard
