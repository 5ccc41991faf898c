"""What a worker would refuse before any model call, refused at submit instead (a 422 naming the field, not an
audit that is accepted and fails later): the item the worker builds, claims over the desk's length limit, and
each task's own checks (task rag without sources, summarization without a document)."""

from __future__ import annotations

from pydantic import ValidationError

from debate.config import VerifierConfig
from debate.errors import InputError, UsageError, validation_problem
from debate.plugins import TASKS, EstimatesWork, TaskInput
from debate.results import BatchItem
from markov_debate.desk.requests import AuditRequest

__all__ = ["check_runnable", "work_item"]


def work_item(request: AuditRequest) -> BatchItem:
    """The request as the batch item the worker runs (claims as sentences, the reference as evidence)."""
    return BatchItem(id="audit", response=request.response, reference=request.reference, claims=request.claims)


def check_runnable(request: AuditRequest, config: VerifierConfig, *, max_claim_chars: int | None) -> None:
    """Raise InputError naming the field for a request the worker could not run."""
    try:
        item = work_item(request)
    except ValidationError as exc:
        raise InputError(validation_problem(exc, "request")) from exc
    texts = item.claim_texts()
    if texts is not None and max_claim_chars is not None:
        for index, text in enumerate(texts):
            if len(text) > max_claim_chars:
                raise InputError(
                    f"claims.{index}: {len(text):,} characters; the limit is {max_claim_chars:,} "
                    "(the desk's max_claim_chars)"
                )
    if request.overrides.chain is not None:
        from debate.engine import load_chain

        try:
            # A role the server gives a model to (its run's or a cascade team's) that the audit's chain lacks.
            load_chain(config.debate.chain).check_roles(config.named_roles())
        except UsageError as exc:
            raise InputError(f"overrides.chain: {exc}") from exc
    task = TASKS.get(request.task)()
    if isinstance(task, EstimatesWork):
        # The task's cost estimate reads the item as its run will, without a model call: what it refuses, the
        # run would refuse too.
        task.expected_work(
            TaskInput(response=request.response, question=request.question, reference=item.evidence(), claims=texts),
            config,
        )
