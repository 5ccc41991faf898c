"""kbqa / general (FactPrompts, open QA): claims of the response vs. the reference document's top-k sentences,
else search results when a backend is configured, else the model's own knowledge (said in the report's note)."""

from __future__ import annotations

from debate.config import VerifierConfig
from debate.plugins import TASKS, Plan, StageContext, TaskInput, TaskWork
from debate.tasks._common import extract_claims, extraction_work, given_claims, reference_evidence


class OpenTask:
    """claims vs. the reference, else search, else knowledge-free."""

    def __init__(self, name: str = "general") -> None:
        self.name = name

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        extraction = given_claims(item) or await extract_claims(item.response, context=item.question, ctx=ctx)
        notes = list(extraction.notes)
        return Plan(extraction.claims, extraction.info, reference_evidence(item.reference, ctx, notes), notes)

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        return extraction_work(item, config)


TASKS.register("kbqa", lambda: OpenTask("kbqa"))
TASKS.register("general", lambda: OpenTask("general"))
