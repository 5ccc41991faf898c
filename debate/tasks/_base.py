"""The defaults a task builds on: subclass BaseTask, set `name`, override what the task does differently."""

from __future__ import annotations

from debate.claims import Extraction
from debate.config import VerifierConfig
from debate.plugins import EvidenceSource, Plan, StageContext, TaskInput, TaskWork
from debate.tasks._common import extract_claims, extraction_work, given_claims, reference_evidence

__all__ = ["BaseTask"]


class BaseTask:
    """A task with the open-response defaults: the claims the caller gave, else the configured extractor's (one
    model call); each claim's evidence the reference's top-k sentences, else search results when a backend is
    configured, else none (said in the report's note). Override `claims` or `evidence` (or `plan` itself) for what
    your task does differently, and `expected_work` when it costs something else; register the class (it is its
    own zero-argument factory) with `TASKS.register(name, MyTask)` or an entry point in `markov_debate.tasks`."""

    name: str = ""
    """The name the task is registered and recorded under."""

    async def claims(self, item: TaskInput, ctx: StageContext) -> Extraction:
        """The response's claims (raise ExtractionError when the model's replies stay unusable)."""
        return given_claims(item) or await extract_claims(item.response, context=item.question, ctx=ctx)

    def evidence(self, item: TaskInput, ctx: StageContext, notes: list[str]) -> EvidenceSource:
        """Where each claim's evidence comes from; append to `notes` what the report should say about it."""
        return reference_evidence(item.reference, ctx, notes)

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        extraction = await self.claims(item, ctx)
        notes = list(extraction.notes)
        return Plan(extraction.claims, extraction.info, self.evidence(item, ctx, notes), notes)

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        """What an item costs before its debates (`debate verify --estimate`): one extraction call unless the
        caller gave the claims."""
        return extraction_work(item, config)
