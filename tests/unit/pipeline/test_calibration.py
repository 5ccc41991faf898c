"""A calibration file at run time: p_factual per claim and response (checked by hand against the file's rates), the
posterior stop, the refusals (another model, prompt set or chain; an uncalibrated file under the stop), the warning
every report carries when the fit's checks failed, and unreadable files."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import CalibrationError, load_calibration
from debate.cli.render import verdict_caveats
from debate.plugins import TaskInput
from debate.rollup import response_p_factual
from debate.testing import ScriptedChatClient
from debate.types import ClaimVerdict, Report
from tests.support.calibration import FAILED_MARKOV, RATES, calibration, save_calibration
from tests.support.helpers import op
from tests.support.properties import Reached


def _posterior(says: list[tuple[str, bool]]) -> float:
    yes = no = 0.5
    for role, verdict in says:
        t, f = RATES[role]
        yes *= t if verdict else 1 - t
        no *= f if verdict else 1 - f
    return yes / (yes + no)


async def _verify(client: ScriptedChatClient, **debate: Any) -> Report:
    async with Verifier(config=VerifierConfig(debate=DebateConfig(**debate)), client=client) as verifier:
        return await verifier.verify(
            TaskInput("Paris", question="What is the capital of France?", reference="Paris is.")
        )


async def test_each_claim_and_the_response_get_p_factual_by_bayes_rule(tmp_path: Path) -> None:
    client = ScriptedChatClient({"debate": [op(True)] * 7})
    report = await _verify(client, calibration=save_calibration(tmp_path, calibration()))
    claim = report.claims[0]
    assert claim.debate is not None and claim.debate.stop_reason == "consensus" and len(client.calls) == 7
    said = [(t.role, bool(t.factuality)) for s in claim.debate.states for t in s.turns]
    assert claim.p_factual == pytest.approx(_posterior(said), rel=1e-12)
    assert report.p_factual == pytest.approx(claim.p_factual)  # one claim under any-false
    assert report.calibration is not None and report.calibration.calibrated and report.calibration.warning is None
    assert report.to_dataframe()["p_factual"].iloc[0] == pytest.approx(claim.p_factual)


async def test_the_posterior_stop_ends_the_debate_once_decided(tmp_path: Path) -> None:
    client = ScriptedChatClient({"debate": [op(True)] * 7})
    report = await _verify(client, calibration=save_calibration(tmp_path, calibration()), stop="posterior:0.9")
    claim = report.claims[0]
    # initial true: 0.727; then S2's skeptic true: 0.941 >= 0.9 (true-to-skeptic enters S2 on true)
    assert claim.debate is not None and claim.debate.stop_reason == "posterior"
    assert len(client.calls) == 2
    assert claim.p_factual == pytest.approx(_posterior([("initial", True), ("skeptic", True)]))
    assert claim.factual is True and report.calibration is not None and report.calibration.stop == "posterior:0.9"


async def test_the_posterior_decides_the_verdict_against_the_last_speaker(tmp_path: Path) -> None:
    # initial true, skeptic false, trust true, leader false: the leader's "false" is the paper's verdict, but these
    # rates put P(factual) at 0.68 when the cap (max_rounds 1) ends the debate undecided
    client = ScriptedChatClient({"debate": [op(True), op(False), op(True), op(False)]})
    report = await _verify(
        client, calibration=save_calibration(tmp_path, calibration()), stop="posterior:0.99", min_rounds=1, max_rounds=1
    )
    claim = report.claims[0]
    p = _posterior([("initial", True), ("skeptic", False), ("trust", True), ("leader", False)])
    assert claim.p_factual == pytest.approx(p) and p > 0.5
    assert claim.debate is not None and claim.debate.stop_reason == "max_rounds"
    assert claim.factual is True


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"model": "another-model"}, "was fitted on model 'another-model'; this run uses 'scripted'"),
        ({"chain": "always-trust"}, "was fitted on chain 'always-trust'; this run's chain 'true-to-skeptic' differs"),
    ],
)
async def test_a_calibration_of_another_model_or_chain_is_refused_in_one_line(
    tmp_path: Path, changed: dict[str, str], expected: str
) -> None:
    path = save_calibration(
        tmp_path, calibration(model=changed.get("model", "scripted"), chain=changed.get("chain", "true-to-skeptic"))
    )
    with pytest.raises(CalibrationError) as caught:
        await _verify(ScriptedChatClient({"debate": [op(True)] * 7}), calibration=path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


async def test_a_calibration_of_other_prompts_is_refused_naming_them(tmp_path: Path) -> None:
    data = json.loads(calibration().model_dump_json())
    data["fitted_on"]["prompts"]["skeptic"] = "0" * 64
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"fitted on other prompts: skeptic differ"):
        await _verify(ScriptedChatClient({"debate": []}), calibration=str(path))
    with pytest.raises(CalibrationError, match="other prompts"):
        # the refusal comes before any model is started or called
        Verifier(config=VerifierConfig(debate=DebateConfig(calibration=str(path))))


async def test_an_uncalibrated_file_warns_on_every_report_and_the_stop_refuses_it(tmp_path: Path) -> None:
    path = save_calibration(tmp_path, calibration(checks=[FAILED_MARKOV]))
    report = await _verify(ScriptedChatClient({"debate": [op(True)] * 7}), calibration=path)
    assert report.p_factual is not None and report.calibration is not None
    assert not report.calibration.calibrated
    warning = "p_factual is not calibrated: the markov check fails (G = 40.0 on 4 df)"
    assert report.calibration.warning == warning
    assert warning in verdict_caveats(report)  # on the verdict's own line
    with pytest.raises(
        CalibrationError,
        match=r"--debate.stop posterior:0.9 refuses calibration .*markov check.*--debate.force-calibration",
    ):
        await _verify(ScriptedChatClient({"debate": []}), calibration=path, stop="posterior:0.9")
    forced = await _verify(
        ScriptedChatClient({"debate": [op(True)] * 7}), calibration=path, stop="posterior:0.9", force_calibration=True
    )
    assert forced.claims[0].debate is not None and forced.claims[0].debate.stop_reason == "posterior"
    assert forced.calibration is not None and forced.calibration.warning == warning


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("not json", "cannot be read"),
        ('{"format": "something else"}', "not a calibration file"),
        (
            '{"format": "markov-debate-calibration", "version": 6}',
            "version 6; this markov-debate reads versions 1, 2, 3, 4, 5",
        ),
        ('{"format": "markov-debate-calibration", "version": 1, "fitted_on": {}}', "fitted_on.model: Field required"),
    ],
)
def test_an_unusable_file_is_refused_naming_what(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CalibrationError) as caught:
        load_calibration(path)
    assert expected in str(caught.value) and str(path) in str(caught.value)
    with pytest.raises(CalibrationError, match="cannot be read"):
        load_calibration(tmp_path / "missing.json")


_DECIMALS = st.tuples(
    st.sampled_from(["", "0", "1", "00"]), st.text("0123456789", min_size=1, max_size=4), st.text(" \t", max_size=2)
).map(lambda parts: f"{parts[2]}posterior:{parts[0]}.{parts[1]}{parts[2]}")
_STOP_TEXTS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["consensus", "Consensus", " consensus", "posterior", "posterior:", "posterior:0.5", "posterior:1"]
    ),
    st.floats(0, 1.2).map(lambda p: f"posterior:{p}"),
    st.floats(0, 1.2).map(lambda p: f"cascade:{p}"),
    _DECIMALS,
)


def _documented_stop(text: str) -> tuple[str, float] | str | None:
    """The rule as docs/dynamics.md and docs/teams.md state it: "consensus", or posterior:P or cascade:P with P a
    decimal fraction (0.75 or .75) strictly between 0.5 and 1, surrounding blanks ignored; None for anything else."""
    if text == "consensus":
        return "consensus"
    body = text.strip()
    kind = next((k for k in ("posterior", "cascade") if body.startswith(f"{k}:")), None)
    if kind is None:
        return None
    number = body.removeprefix(f"{kind}:")
    whole, dot, fraction = number.partition(".")
    if whole not in ("", "0") or not dot or not fraction.isascii() or not fraction.isdigit():
        return None
    value = float(f"0.{fraction}")
    return (kind, value) if 0.5 < value < 1 else None


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # `reached` counts across the examples
@given(text=_STOP_TEXTS)
def test_any_stop_text_is_a_rule_or_a_named_refusal(text: str, reached: Reached) -> None:
    """Correct outcome: the rule the text states, normalised, or a refusal located at `stop`; both are reached."""
    reached.require(posterior=0.03, cascade=0.01, refused=0.1)
    expected = _documented_stop(text)
    # The cascade stop names its teams: given here, so a cascade text is judged as the posterior's is.
    teams = [{"name": "strong", "calibration": "strong.json"}] if text.strip().startswith("cascade:") else []
    try:
        config = DebateConfig(stop=text, calibration="cal.json", cascade=teams)
    except ValidationError as exc:
        reached("refused")
        assert expected is None, (text, expected)
        assert exc.errors()[0]["loc"] == ("stop",)
        return
    if expected == "consensus":
        reached("consensus")
        assert config.stop == "consensus" and config.threshold is None
        return
    assert isinstance(expected, tuple), (text, config.stop)
    kind, value = expected
    reached(kind)
    assert config.threshold == value and config.stop == f"{kind}:{value!r}"


def _claims(ps: list[float]) -> list[ClaimVerdict]:
    return [
        ClaimVerdict(
            claim_id=f"c{i}",
            text="t",
            status="verified",
            label="factual",
            factual=True,
            error_severity=0,
            evidence=[],
            debate=None,
            p_factual=p,
        )
        for i, p in enumerate(ps)
    ]


@given(st.lists(st.floats(0, 1), min_size=1, max_size=7), st.sampled_from([0.3, 0.5, 0.75]))
def test_the_responses_probability_follows_each_rollup_exactly(ps: list[float], threshold: float) -> None:
    claims = _claims(ps)
    expected = dict.fromkeys(("any-false", "major", "soft"), 0.0)
    for said in itertools.product((True, False), repeat=len(ps)):
        weight = 1.0
        for p, s in zip(ps, said, strict=True):
            weight *= p if s else 1 - p
        factual = sum(said)
        expected["any-false"] += weight * all(said)
        # RefChecker's major: most_common(1), a tie to the label met first
        expected["major"] += weight * (factual * 2 > len(ps) or (factual * 2 == len(ps) and said[0]))
        expected["soft"] += weight * (factual / len(ps) >= threshold)
    for rule, value in expected.items():
        got, why = response_p_factual(claims, rule=rule, options={"threshold": threshold})
        assert why is None and got == pytest.approx(value, abs=1e-9)


def test_a_claim_without_p_factual_leaves_the_response_without_one() -> None:
    claims = [*_claims([0.9]), *_claims([0.8])]
    claims[1] = claims[1].model_copy(update={"claim_id": "c9", "p_factual": None})
    assert response_p_factual(claims) == (None, "claim(s) c9 have no p_factual (a prefilter decided, or a turn failed)")


@given(prior=st.floats(min_value=0.01, max_value=0.99))
def test_the_prior_scales_the_odds_of_every_debate_by_the_base_rates_odds(prior: float) -> None:
    """`--prior P`: a debate's odds of being factual scale by (P / (1 - P)) / (fitted / (1 - fitted)), whatever it
    said; the fitted share here is 0.5."""
    from debate.engine import TurnContext

    cal = calibration()
    said = [TurnContext("initial", "S1", (True,), True), TurnContext("skeptic", "S1", (True,), False)]
    p, q = cal.model().p_factual(said), cal.model(prior).p_factual(said)
    assert p is not None and q is not None
    assert q / (1 - q) == pytest.approx(p / (1 - p) * prior / (1 - prior), rel=1e-9)
    assert p == pytest.approx(_posterior([("initial", True), ("skeptic", False)]), rel=1e-12)


def test_no_thin_context_makes_p_factual_exactly_0_or_1() -> None:
    """A context seen three times, always "true", reads (3 + 0.5) / (3 + 1) = 0.875, not 1: a debate that says
    "false" there is unlikely, not impossible."""
    from debate.calibration import Calibration
    from debate.engine import TurnContext

    data = calibration().model_dump(mode="json")
    data["classes"][0]["counts"] = [
        {"role": "initial", "state": "S0", "label": True, "shown": [], "true": 3.0, "n": 3.0},
        {"role": "initial", "state": "S0", "label": False, "shown": [], "true": 0.0, "n": 3.0},
    ]
    thin = Calibration.model_validate(data)
    assert thin.model().classes[0].p("initial", "S0", True, ()) == pytest.approx(0.875)
    for verdict in (True, False):
        p = thin.model().p_factual([TurnContext("initial", "S0", (), verdict)])
        assert p is not None and 0 < p < 1
    assert thin.model().p_factual([TurnContext("initial", "S0", (), True)]) == pytest.approx(0.875 / (0.875 + 0.125))
    # read without smoothing, the file is the fit's own maximum-likelihood model (what its EM's posterior is), and
    # asking for it leaves the smoothed model p_factual reads as it was
    raw = thin.model(smoothing=0.0)
    assert raw.classes[0].p("initial", "S0", True, ()) == 1.0
    assert raw.p_factual([TurnContext("initial", "S0", (), False)]) == 0.0
    assert thin.model().classes[0].p("initial", "S0", True, ()) == pytest.approx(0.875)


def test_a_version_1_file_reads_as_fully_labelled_and_checked_on_pooled_turns(tmp_path: Path) -> None:
    data = json.loads(calibration(checks=[FAILED_MARKOV]).model_dump_json())
    data["version"] = 1
    data.pop("labels")
    for check in data["checks"]:
        check.pop("reference")
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    old = load_calibration(path)
    assert old.labels is None and old.checks[0].reference == "chi-square" and not old.calibrated


async def test_a_running_verifier_takes_a_new_calibration_without_a_restart(tmp_path: Path) -> None:
    """The desk and the guard keep one Verifier for hours: a calibration file replaced under them is read again
    (and checked) at the next response, and each report names the file it was scored with; a replacement that
    does not fit this run fails the responses it would have scored, in one line."""
    import hashlib
    import os

    path = Path(save_calibration(tmp_path, calibration()))
    config = VerifierConfig(debate=DebateConfig(calibration=str(path)))
    client = ScriptedChatClient({"debate": [op(True)] * 21})

    def replace(cal: Any) -> str:
        fresh = tmp_path / "fresh.json"
        fresh.write_text(cal.model_dump_json())
        stat = path.stat()
        fresh.replace(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new file, whatever the clock
        return hashlib.sha256(path.read_bytes()).hexdigest()

    item = TaskInput("Paris", question="What is the capital of France?", reference="Paris is.")
    async with Verifier(config=config, client=client) as verifier:
        first = await verifier.verify(item)
        shifted = calibration().model_copy(
            update={"fitted_on": calibration().fitted_on.model_copy(update={"factual_share": 0.2})}
        )
        sha = replace(shifted)
        second = await verifier.verify(item)
        replace(calibration(model="another-model"))
        third = await verifier.verify(item)
    assert first.calibration is not None and second.calibration is not None
    assert second.calibration.sha256 == sha != first.calibration.sha256
    p, q = first.claims[0].p_factual, second.claims[0].p_factual
    assert p is not None and q is not None
    assert q / (1 - q) == pytest.approx(p / (1 - p) * (0.2 / 0.8), rel=1e-9)  # the prior's odds, nothing else
    assert third.failure is not None and third.failure.stage == "calibration"
    assert "was fitted on model 'another-model'" in third.failure.message and third.p_factual is None
