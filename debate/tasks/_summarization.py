"""summarization: claims extracted from the summary, each judged against the top-k sentences of the document."""

from __future__ import annotations

from debate.config import VerifierConfig
from debate.errors import InputError
from debate.plugins import Plan, StageContext, TaskInput, TaskWork
from debate.tasks._common import as_document, extract_claims, extraction_work, given_claims, reference_evidence


class SummarizationTask:
    """claims of the summary vs. the top-k sentences of the source document (`reference`)."""

    name = "summarization"

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        _need_document(item)
        extraction = given_claims(item) or await extract_claims(item.response, context=item.question, ctx=ctx)
        notes = list(extraction.notes)
        return Plan(extraction.claims, extraction.info, reference_evidence(item.reference, ctx, notes), notes)

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        _need_document(item)  # what the run refuses, the estimate (and the desk's submit) refuses too
        return extraction_work(item, config)


def _need_document(item: TaskInput) -> None:
    if as_document(item.reference) is None:
        raise InputError("task summarization needs the source document as `reference`")
