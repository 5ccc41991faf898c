"""HaluEval as an inspect_ai task (extra `inspect`): the debate as a hallucination detector, scored against the
benchmark's labels.

    inspect eval markov_debate/halueval -T task=qa -T n=150 -T base_url=http://localhost:8000/v1 \\
        --model mockllm/model

Each sample is one HaluEval item (the paper's protocol: the right or the hallucinated response, drawn by the seed,
as `debate eval halueval` draws them); its target is `factual` or `non_factual`. The solver only hands the item's
response over as the output, so inspect's `--model` is never called (mockllm/model will do); the judge is the
debate's model (`base_url`/`model`, else OPENAI_BASE_URL / DEBATE_MODEL, else the embedded model, which starts once
per sample). accuracy is the detector's accuracy, with unverifiable items counted as wrong as the paper counts them,
and `unverifiable` their share.
"""

from __future__ import annotations

from pathlib import Path

from debate.extras import require_extra

require_extra("inspect", "markov_debate.inspect_tasks")

from inspect_ai import Task, task  # noqa: E402 - after the one-line refusal without the extra
from inspect_ai.dataset import MemoryDataset, Sample  # noqa: E402
from inspect_ai.model import ModelOutput  # noqa: E402
from inspect_ai.solver import Generate, Solver, TaskState, solver  # noqa: E402

from debate.config import DebateConfig, ModelConfig, VerifierConfig  # noqa: E402
from debate.integrations.inspect_ai import debate_scorer  # noqa: E402
from experiments.data import HaluTask, default_data_dir, halueval_items  # noqa: E402

__all__ = ["audited_response", "halueval"]


@solver
def audited_response() -> Solver:
    """The output is the item's response under audit (no model call)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.output = ModelOutput.from_content(model="audited", content=str(state.metadata["response"]))
        return state

    return solve


@task
def halueval(
    task: HaluTask = "qa",
    n: int | None = 150,
    seed: int = 0,
    data_dir: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    min_rounds: int = 2,
    max_rounds: int = 5,
) -> Task:
    """HaluEval `task` (qa, dialogue, summarization, general), `n` items drawn by `seed` (None: all)."""
    folder = Path(data_dir) if data_dir else default_data_dir("halueval")
    samples = [
        Sample(
            id=item.id,
            input=item.question or "(none)",
            target="factual" if item.label_factual else "non_factual",
            metadata={"response": item.response, "reference": item.reference},
        )
        for item in halueval_items(task, data_dir=folder, n=n, seed=seed)
    ]
    config = VerifierConfig(
        model=ModelConfig.from_env(base_url=base_url, model=model),
        debate=DebateConfig(min_rounds=min_rounds, max_rounds=max_rounds),
    )
    verify_as = "general" if task == "general" else task
    return Task(
        dataset=MemoryDataset(samples, name=f"halueval-{task}"),
        solver=audited_response(),
        scorer=debate_scorer(config=config, task=verify_as, against_target=True),
    )
