"""A calibration fitted without enough labels to pin the share of factual claims (its interval wider than
MAX_SHARE_WIDTH) is not calibrated for its base rate. The stop no longer refuses it: it decides only where
p_factual passes P for every share in the interval (debate.engine.IntervalGovernor), and the report says so.
Worked by hand: each role says true with 0.65 on factual claims and 0.35 on hallucinated ones, so a "true" adds
log(0.65 / 0.35) = 0.619 to the log-odds; from a share of 0.5 four in a row pass 0.9 (2.48 > 2.20), from the
interval's lowest share 0.3 (log-odds -0.85) it takes five (2.25)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.calibration import MAX_SHARE_WIDTH, Calibration, Labels
from debate.engine import result_records
from debate.errors import CalibrationError
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from tests.support.calibration import FAILED_MARKOV, calibration
from tests.support.helpers import op

ITEM = TaskInput("Paris", question="What is the capital of France?", reference="Paris is the capital.")
RATES = {role: (0.65, 0.35) for role in ("initial", "trust", "skeptic", "leader")}
INTERVAL = (0.3, 0.7)


def _uncertain(tmp_path: Path, *, markov_fails: bool = False) -> str:
    fitted = calibration(model="weak", rates=RATES, checks=[FAILED_MARKOV] if markov_fails else None)
    labels = Labels(
        claims=2000, labelled=0, orientation="assumption", share_interval=INTERVAL, share_standard_error=0.1
    )
    line = labels.base_rate_line()
    assert line is not None and INTERVAL[1] - INTERVAL[0] > MAX_SHARE_WIDTH
    cal = Calibration.model_validate(
        {**fitted.model_dump(), "labels": labels.model_dump(), "not_calibrated": [*fitted.not_calibrated, line]}
    )
    path = tmp_path / "uncertain.json"
    path.write_text(cal.model_dump_json())
    return str(path)


def _config(file: str, stop: str, prior: float | None = None) -> VerifierConfig:
    debate = DebateConfig(min_rounds=1, max_rounds=2, calibration=file, stop=stop, prior=prior)
    return VerifierConfig(model={"model": "weak"}, debate=debate)


async def _run(config: VerifierConfig) -> tuple[int, str, float | None, str | None]:
    client = ScriptedChatClient({"debate": [op(True)] * 7}, model="weak")
    later = {team.name: ScriptedChatClient({"debate": []}, model=team.name) for team in config.debate.cascade}
    async with Verifier(config=config, client=client, cascade_clients=later) as verifier:
        report = await verifier.verify(ITEM)
    claim, note = report.claims[0], report.calibration
    assert claim.debate is not None and note is not None
    return len(result_records(claim.debate)), claim.debate.stop_reason, claim.p_factual, note.warning


def _p(share: float, trues: int) -> float:
    return 1 / (1 + math.exp(-(math.log(share / (1 - share)) + trues * math.log(0.65 / 0.35))))


@pytest.mark.parametrize("stop", ["posterior:0.9", "voi:0.9"])
async def test_the_stop_decides_where_every_share_in_the_interval_passes(tmp_path: Path, stop: str) -> None:
    turns, reason, p, warning = await _run(_config(_uncertain(tmp_path), stop))
    assert (_p(0.5, 4) >= 0.9, _p(0.3, 4) < 0.9, _p(0.3, 5) >= 0.9) == (True, True, True)
    assert turns == 5 and reason == "posterior"
    assert p == pytest.approx(_p(0.5, 5))  # said at the fitted share, as the file's p_factual always is
    assert warning is not None and "for every share of factual claims in [0.300, 0.700]" in warning
    assert "the turns do not pin the share of factual claims" in warning


async def test_a_stated_prior_does_not_stand_for_the_interval(tmp_path: Path) -> None:
    # the fit's rates were estimated with the share it could not pin: a prior stated at run time moves the odds,
    # not them, so the file stays refused, and the message says how to run it
    with pytest.raises(CalibrationError, match=r"no --debate\.prior: the stop then reads the share interval.s worst"):
        await _run(_config(_uncertain(tmp_path), "posterior:0.9", prior=0.5))


async def test_a_file_that_fails_another_check_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="refuses calibration"):
        await _run(_config(_uncertain(tmp_path, markov_fails=True), "posterior:0.9"))


async def test_the_cascade_reads_the_interval_too(tmp_path: Path) -> None:
    strong = tmp_path / "strong.json"
    strong.write_text(calibration(model="strong", rates={r: (0.95, 0.05) for r in RATES}).model_dump_json())
    cascade = [{"name": "strong", "model": {"model": "strong"}, "calibration": str(strong)}]
    debate = DebateConfig(
        min_rounds=1, max_rounds=2, calibration=_uncertain(tmp_path), stop="cascade:0.9", cascade=cascade
    )
    config = VerifierConfig(model={"model": "weak"}, debate=debate)
    turns, reason, p, warning = await _run(config)  # the weak team decides at its fifth turn: no call to strong
    assert turns == 5 and reason == "posterior" and p == pytest.approx(_p(0.5, 5))
    assert warning is not None and "for every share of factual claims in [0.300, 0.700]" in warning
