"""The debate as an inspect_ai scorer (extra `inspect`): `debate_scorer(...)` in any inspect `Task`.

    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate
    from debate.integrations.inspect_ai import debate_scorer

    @task
    def capitals() -> Task:
        return Task(
            dataset=[Sample(input="What is the capital of France?", metadata={"reference": "Paris is ..."})],
            solver=generate(),
            scorer=debate_scorer(base_url="http://localhost:8000/v1", model="my-judge"),
        )

Each sample's output (the model's answer) is verified against the sample's `metadata[reference]` (knowledge or a
document; none: knowledge-free) with the sample's input as the question. The Score's value is C (factual), I (not
factual) or N (not enough evidence, no checkable claim, or unverifiable: the judge's reply was unusable or the
endpoint failed); an N from a failure carries `reason="grader_failed"`, so it is never read as a judgment. The
explanation lists each claim's label and final opinion; the metadata carries the verdict, the claims and the whole
report (the debate transcript), and with a calibration each claim's and the response's p_factual. With
`against_target=True` the verdict is compared with the sample's target (`factual` or `non_factual`) instead, as a
hallucination benchmark scores a detector (`markov_debate/halueval`).
"""

from __future__ import annotations

from typing import Any

from debate.extras import require_extra
from debate.plugins import TaskInput

require_extra("inspect", "debate.integrations.inspect_ai")

from inspect_ai.scorer import (  # noqa: E402 - after the one-line refusal without the extra
    CORRECT,
    INCORRECT,
    NOANSWER,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState  # noqa: E402

from debate.config import ModelConfig, VerifierConfig  # noqa: E402
from debate.integrations import claim_lines  # noqa: E402
from debate.pipeline import Verifier  # noqa: E402
from debate.types import Report  # noqa: E402

__all__ = ["debate_scorer", "unverifiable"]

_VALUES = {"factual": CORRECT, "non_factual": INCORRECT}


@metric(scores="unreduced")
def unverifiable() -> Metric:
    """The share of samples the debate could not judge (N scores): shown beside accuracy, which counts them as
    wrong, so that a failing judge is never mistaken for a bad model. Read from each epoch's own score: reduced
    scores are numbers, where N and I are both 0."""

    def share(scores: list[SampleScore]) -> float:
        return sum(s.score.value == NOANSWER for s in scores) / len(scores) if scores else 0.0

    return share


def _score(report: Report, target: Target | None) -> Score:
    failed = report.verdict == "unverifiable"
    if target is None:
        value = _VALUES.get(report.verdict, NOANSWER)
    elif report.verdict in _VALUES:
        value = CORRECT if report.verdict == target.text.strip() else INCORRECT
    else:
        value = NOANSWER
    return Score(
        value=value,
        answer=report.response,
        explanation=claim_lines(report),
        reason="grader_failed" if failed else None,
        metadata={
            "verdict": report.verdict,
            "score": report.score,
            "p_factual": report.p_factual,
            "calibration": None if report.calibration is None else report.calibration.model_dump(mode="json"),
            "note": report.note,
            "claims": [
                {"text": c.text, "label": c.label, "p_factual": c.p_factual, "reason": c.reason} for c in report.claims
            ],
            "report": report.model_dump(mode="json"),
        },
    )


@scorer(metrics=[accuracy(), stderr(), unverifiable()])
def debate_scorer(
    *,
    config: VerifierConfig | None = None,
    base_url: str | None = None,
    model: str | None = None,
    task: str = "qa",
    reference: str = "reference",
    against_target: bool = False,
) -> Scorer:
    """A scorer that verifies each sample's output by Markov-chain debate.

    `config` (or just `base_url` and `model`, the rest defaults; OPENAI_BASE_URL / DEBATE_MODEL when neither is
    given) chooses the judge; `task` is the verification setting (qa, summarization, dialogue, general, rag);
    `reference` the metadata key holding the evidence."""
    chosen = config or VerifierConfig(model=ModelConfig.from_env(base_url=base_url, model=model))

    async def score(state: TaskState, target: Target) -> Score:
        response = state.output.completion
        if not response.strip():
            return Score(
                value=NOANSWER, answer="", explanation="the model gave no answer to verify", reason="no_response"
            )
        evidence: Any = (state.metadata or {}).get(reference)
        async with Verifier(config=chosen) as verifier:
            report = await verifier.verify(
                TaskInput(response, question=state.input_text, reference=evidence, id=str(state.sample_id)), task=task
            )
        return _score(report, target if against_target else None)

    return score
