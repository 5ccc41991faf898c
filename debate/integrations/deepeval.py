"""The debate as a DeepEval metric (extra `deepeval`): `DebateFactualityMetric` in `assert_test`, `evaluate` and
`deepeval test run`.

    from deepeval import assert_test
    from deepeval.test_case import LLMTestCase
    from debate.integrations.deepeval import DebateFactualityMetric

    def test_capital() -> None:
        case = LLMTestCase(input="What is the capital of France?", actual_output="Paris",
                           context=["Paris is the capital and largest city of France."])
        assert_test(case, [DebateFactualityMetric(base_url="http://localhost:8000/v1", model="my-judge")])

The test case's `actual_output` is verified against its `context` (else `retrieval_context`; neither: knowledge-
free) with its `input` as the question. `score` is the report's score (the share of the response's claims judged
factual, with partial credit as debate.rollup gives it), or with a calibration (`VerifierConfig.debate.calibration`)
its p_factual, P(the response is factual), `success` is whether the verdict is factual and the score
reaches `threshold`, and `reason` lists each claim's label and final opinion. An unusable judge reply or a failed
endpoint never becomes a score: `measure` raises `NoVerdictError` (DeepEval then fails the test with that message,
or records it as the metric's `error` under `ignore_errors`), `score` stays None and `success` False.
"""

from __future__ import annotations

from typing import Any

from debate.extras import require_extra
from debate.plugins import TaskInput

require_extra("deepeval", "debate.integrations.deepeval")

from deepeval.metrics import BaseMetric  # noqa: E402 - after the one-line refusal without the extra
from deepeval.test_case import LLMTestCase  # noqa: E402

from debate.concurrency import run_blocking  # noqa: E402
from debate.config import ModelConfig, VerifierConfig  # noqa: E402
from debate.errors import NoVerdictError  # noqa: E402
from debate.integrations import claim_lines  # noqa: E402
from debate.pipeline import Verifier  # noqa: E402
from debate.types import Evidence, Report  # noqa: E402

__all__ = ["DebateFactualityMetric", "NoVerdictError"]


class DebateFactualityMetric(BaseMetric):  # type: ignore[no-untyped-call]  # deepeval's __init_subclass__
    """Verifies `actual_output` by Markov-chain multi-agent debate."""

    def __init__(
        self,
        *,
        threshold: float = 1.0,
        config: VerifierConfig | None = None,
        base_url: str | None = None,
        model: str | None = None,
        task: str = "qa",
        include_reason: bool = True,
        strict_mode: bool = False,
        async_mode: bool = True,
    ) -> None:
        self.threshold = 1.0 if strict_mode else threshold
        self.config = config or VerifierConfig(model=ModelConfig.from_env(base_url=base_url, model=model))
        self.task = task
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.async_mode = async_mode
        self.evaluation_model = self.config.model.model or "debate"
        self.report: Report | None = None
        """The last report (the whole debate transcript)."""

    @property
    def __name__(self) -> str:  # DeepEval names a metric by this property
        return "Debate Factuality"

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        return run_blocking(self.a_measure(test_case))

    async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        response = test_case.actual_output or ""
        self.score = self.reason = self.error = None
        self.success = False
        if not response.strip():
            self.error = "the test case has no actual_output to verify"
            raise NoVerdictError(self.error)
        texts = test_case.context or test_case.retrieval_context or []
        evidence = [Evidence(text=str(t), source=f"context[{i}]") for i, t in enumerate(texts) if str(t).strip()]
        async with Verifier(config=self.config) as verifier:
            report = await verifier.verify(
                TaskInput(response, question=test_case.input, reference=evidence or None), task=self.task
            )
        self.report = report
        self.reason = claim_lines(report) if self.include_reason else None
        self.input_tokens, self.output_tokens = report.usage.prompt_tokens, report.usage.completion_tokens
        if report.verdict == "unverifiable" or report.score is None:
            self.error = f"the debate reached no verdict ({report.note or report.verdict})"
            raise NoVerdictError(self.error)
        # with a calibration the score is P(the response is factual), which a threshold can be set on
        score = report.score if report.p_factual is None else report.p_factual
        self.score = score
        self.success = report.verdict == "factual" and score >= (self.threshold or 0.0)
        return score

    def is_successful(self) -> bool:
        return bool(self.error is None and self.success)
