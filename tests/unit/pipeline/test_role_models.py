"""A model per role: each role's turns go to its own client and name its model; usage splits per model; the
configuration's one name (`roles.<role>.model.<field>`) and its inheritance from `[model]`."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import ENDPOINT_FIELDS, ModelConfig, RoleModelConfig
from debate.errors import CalibrationError, UsageError
from debate.llm import ModelUnavailableError
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from debate.types import Report
from tests.support.calibration import calibration, save_calibration
from tests.support.helpers import op

ITEM = TaskInput("Lyon", question="What is the capital of France?", reference="Paris is the capital.")


def _roles(**models: dict[str, object]) -> VerifierConfig:
    return VerifierConfig(
        debate=DebateConfig(min_rounds=1, max_rounds=1),
        roles={role: {"model": given} for role, given in models.items()},
    )


def _turn_models(report: Report) -> list[tuple[str, str | None]]:
    debate = report.claims[0].debate
    assert debate is not None
    return [(t.role, t.call.model) for s in debate.states for t in s.turns]


def test_role_model_fields_are_the_model_fields() -> None:
    # A field added to [model] and not to a role's model would silently not be settable per role.
    assert set(RoleModelConfig.model_fields) == set(ModelConfig.model_fields)
    assert ENDPOINT_FIELDS <= set(ModelConfig.model_fields)


def test_a_role_takes_every_field_it_does_not_give_from_model() -> None:
    config = VerifierConfig.model_validate(
        {
            "model": {
                "base_url": "http://weak:1/v1",
                "model": "weak",
                "price_in": 1,
                "price_out": 2,
                "requests_per_minute": 60,
            },
            "roles": {
                "skeptic": {"model": {"temperature": 0.7}},
                "leader": {"model": {"base_url": "http://strong:2/v1", "model": "strong", "api_key": "k2"}},
            },
        }
    )
    skeptic = config.model_for("skeptic")
    assert (skeptic.base_url, skeptic.model, skeptic.temperature) == ("http://weak:1/v1", "weak", 0.7)
    assert skeptic.price_in == 1
    leader = config.model_for("leader")
    # Another endpoint: the price and limits of [model]'s endpoint are not its own.
    assert (leader.base_url, leader.model, leader.price_in, leader.requests_per_minute) == (
        "http://strong:2/v1",
        "strong",
        None,
        None,
    )
    assert leader.api_key == SecretStr("k2")
    assert config.model_for("trust") == config.model
    # Saved as written: only what each role sets, never its key.
    saved = config.model_dump(mode="json")["roles"]
    assert saved == {
        "skeptic": {"model": {"temperature": 0.7}},
        "leader": {"model": {"base_url": "http://strong:2/v1", "model": "strong"}},
    }
    assert VerifierConfig.model_validate(config.model_dump(mode="json")).model_for("skeptic") == skeptic


@pytest.mark.parametrize(
    ("roles", "where"),
    [
        ({"leader": {"model": {"temperature": 9}}}, "roles.leader.model.temperature"),
        ({"leader": {"model": {"base_url": "ftp://x"}}}, "roles.leader.model.base_url"),
        ({"leader": {"model": {"tempreature": 1}}}, "roles.leader.model.tempreature"),
        ({"lea der": {"model": {}}}, "roles"),
    ],
)
def test_a_bad_role_model_is_refused_naming_its_field(roles: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        VerifierConfig.model_validate({"roles": roles})
    assert where in str(caught.value).replace("\n", ".").replace(" ", "") or where.split(".")[-1] in str(caught.value)


def test_a_role_the_chain_has_not_is_refused_before_anything_starts() -> None:
    with pytest.raises(UsageError, match=r"roles\.judge: .*no role 'judge'.*leader"):
        Verifier(config=_roles(judge={"temperature": 0.5}), client=ScriptedChatClient([]))


async def test_each_role_speaks_through_its_own_model_and_usage_splits_per_model() -> None:
    weak = ScriptedChatClient({"debate": [op(True)] * 4}, model="weak", prompt_tokens=10, completion_tokens=5)
    strong = ScriptedChatClient({"debate:leader": [op(False)]}, model="strong", prompt_tokens=100, completion_tokens=50)
    async with Verifier(config=_roles(leader={}), client=weak, role_clients={"leader": strong}) as verifier:
        report = await verifier.verify(ITEM)
    assert [c.request.purpose for c in strong.calls] == ["debate:leader"]
    assert "debate:leader" not in weak.purposes()
    assert _turn_models(report) == [
        ("initial", "weak"),
        ("skeptic", "weak"),
        ("trust", "weak"),
        ("leader", "strong"),
    ]
    assert report.meta.model == "weak"
    assert report.meta.roles == {"leader": "strong"}
    by_model = report.usage_by_model()
    assert by_model["strong"].model_dump() == {"llm_calls": 1, "prompt_tokens": 100, "completion_tokens": 50}
    assert by_model["weak"].llm_calls == len(weak.calls)
    assert sum(u.prompt_tokens for u in by_model.values()) == report.usage.prompt_tokens
    # The leader's model decided: its verdict is the claim's.
    assert report.claims[0].factual is False
    # The caller's clients are the caller's to close.
    assert not weak.closed and not strong.closed


async def test_two_endpoints_serving_one_name_are_two_models() -> None:
    first = ScriptedChatClient({"debate": [op(True)] * 4}, model="same")
    second = ScriptedChatClient({"debate:leader": [op(True)]}, model="same")
    async with Verifier(config=_roles(leader={}), client=first, role_clients={"leader": second}) as verifier:
        report = await verifier.verify(ITEM)
    labels = dict(_turn_models(report))
    assert labels["trust"] == "same"
    assert labels["leader"] is not None and labels["leader"].startswith("same@")
    assert set(report.usage_by_model()) == {"same", labels["leader"]}


async def test_a_role_whose_model_fails_makes_only_its_claims_unverifiable() -> None:
    down = ModelUnavailableError("connection refused: http://127.0.0.1:9/v1")
    weak = ScriptedChatClient({"debate": [op(True)] * 8, "prefilter": []}, model="weak")
    strong = ScriptedChatClient({"debate:leader": [down, op(True)]}, model="strong")
    config = _roles(leader={}).model_copy(update={"claim_concurrency": 1})
    async with Verifier(config=config, client=weak, role_clients={"leader": strong}) as verifier:
        failed = await verifier.verify(ITEM)
        passed = await verifier.verify(ITEM)
    assert failed.claims[0].status == "unverifiable"
    assert failed.claims[0].failure is not None
    assert "connection refused" in failed.claims[0].failure.message
    assert passed.claims[0].status == "verified" and passed.claims[0].factual is True
    assert dict(_turn_models(passed))["leader"] == "strong"


async def test_another_verifier_on_this_teams_client_keeps_each_roles_model() -> None:
    """The desk's per-audit overrides open a Verifier on the worker's client: each role still speaks through its
    own model and is named as the worker names it."""
    weak = ScriptedChatClient({"debate": [op(True)] * 8}, model="weak")
    strong = ScriptedChatClient({"debate:leader": [op(True)] * 2}, model="strong")
    async with Verifier(config=_roles(leader={}), client=weak, role_clients={"leader": strong}) as base:
        config = base.worker_configs(1)[0].model_copy(update={"rollup": "strict"})
        async with Verifier(config=config, client=base.client) as other:
            report = await other.verify(ITEM)
            assert other.runtime.role_labels() == {"leader": "strong"}
    assert dict(_turn_models(report))["leader"] == "strong" and report.meta.roles == {"leader": "strong"}
    assert [c.request.purpose for c in strong.calls] == ["debate:leader"]


def _calibrated(tmp_path: Path, roles: dict[str, str], **debate: object) -> VerifierConfig:
    fitted = calibration(model="weak")
    fitted = fitted.model_copy(update={"fitted_on": fitted.fitted_on.model_copy(update={"roles": roles})})
    path = save_calibration(tmp_path, fitted)
    return _roles(leader={}).model_copy(
        update={"debate": DebateConfig(min_rounds=1, max_rounds=1, calibration=path, **debate)}
    )


async def test_a_calibration_fitted_on_another_team_is_refused_naming_the_role(tmp_path: Path) -> None:
    weak = ScriptedChatClient({"debate": [op(True)] * 8}, model="weak")
    strong = ScriptedChatClient({"debate:leader": [op(True)] * 2}, model="strong")
    # Fitted with every role on weak: this team's leader runs on strong.
    config = _calibrated(tmp_path, {})
    with pytest.raises(CalibrationError, match=r"fitted with the leader on model 'weak'; this run's leader runs on "):
        async with Verifier(config=config, client=weak, role_clients={"leader": strong}):
            pass
    # Fitted on this very team: used, and calibrated.
    config = _calibrated(tmp_path, {"leader": "strong"})
    async with Verifier(config=config, client=weak, role_clients={"leader": strong}) as verifier:
        report = await verifier.verify(ITEM)
    assert report.calibration is not None and report.calibration.calibrated, report.calibration
    assert report.claims[0].p_factual is not None


async def test_a_forced_calibration_of_another_team_says_so_on_every_verdict(tmp_path: Path) -> None:
    weak = ScriptedChatClient({"debate": [op(True)] * 8}, model="weak")
    strong = ScriptedChatClient({"debate:leader": [op(True)] * 2}, model="strong")
    config = _calibrated(tmp_path, {}, force_calibration_team=True)
    async with Verifier(config=config, client=weak, role_clients={"leader": strong}) as verifier:
        report = await verifier.verify(ITEM)
    note = report.calibration
    assert note is not None and note.calibrated is False
    assert note.warning is not None and note.warning.startswith("not calibrated: it was fitted with the leader")
