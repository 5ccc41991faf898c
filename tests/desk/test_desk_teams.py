"""The desk with a team: a model per role runs the desk's audits, each audit shows the team behind it, and every
endpoint's key stays out of what the desk stores, returns or logs."""

from __future__ import annotations

from pathlib import Path

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
