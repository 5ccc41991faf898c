"""p_factual where users read scores: the traces' claim evaluation, the scorers' explanation lines, inspect's score
metadata and DeepEval's score (against a scripted judge on 127.0.0.1), and the uncalibrated warning with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.integrations import claim_lines
from debate.pipeline import claim_evaluation
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from debate.types import Report
from tests.support.calibration import FAILED_MARKOV, calibration, save_calibration
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op
from tests.support.phoenix import need

P_TWO_TURNS = 0.48 / 0.51
"""Initial true, then S2's skeptic true, under the hand-written rates: the posterior stop at 0.9 ends there."""


async def _governed(path: str) -> Report:
    config = VerifierConfig(debate=DebateConfig(calibration=path, stop="posterior:0.9", force_calibration=True))
    async with Verifier(config=config, client=ScriptedChatClient({"debate": [op(True)] * 2})) as verifier:
        return await verifier.verify(
            TaskInput("Paris", question="What is the capital of France?", reference="Paris is.")
        )


async def test_the_claim_evaluation_and_explanations_carry_p_factual(tmp_path: Path) -> None:
    report = await _governed(save_calibration(tmp_path, calibration()))
    claim = report.claims[0]
    assert claim_evaluation(claim)["score"] == pytest.approx(P_TWO_TURNS)  # the traces' evaluation score
    assert f"(p_factual {P_TWO_TURNS:.3f})" in claim_lines(report)
    uncalibrated = await _governed(save_calibration(tmp_path, calibration(checks=[FAILED_MARKOV])))
    assert claim_lines(uncalibrated).splitlines()[0].startswith("p_factual is not calibrated: the markov check fails")


async def test_inspect_metadata_and_the_deepeval_score_are_p_factual(tmp_path: Path) -> None:
    need("deepeval")
    need("inspect_ai")
    from deepeval.test_case import LLMTestCase

    from debate.integrations.deepeval import DebateFactualityMetric
    from debate.integrations.inspect_ai import _score

    report = await _governed(save_calibration(tmp_path, calibration()))
    scored = _score(report, None)
    assert scored.metadata is not None and scored.metadata["p_factual"] == pytest.approx(P_TWO_TURNS)
    assert scored.metadata["claims"][0]["p_factual"] == pytest.approx(P_TWO_TURNS)
    path = save_calibration(tmp_path, calibration(model="fake-model"))
    with FakeOpenAI(routes={"debate": [Reply(content=op(True))] * 2}) as judge:
        config = VerifierConfig(
            model=ModelConfig(base_url=judge.base_url, model="fake-model"),
            debate=DebateConfig(calibration=path, stop="posterior:0.9"),
        )
        metric = DebateFactualityMetric(config=config, threshold=0.9)
        case = LLMTestCase(input="What is the capital of France?", actual_output="Paris", context=["Paris is."])
        score = await metric.a_measure(case)
    assert score == pytest.approx(P_TWO_TURNS) and metric.is_successful()  # 0.941 >= 0.9
