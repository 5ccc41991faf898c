"""A plugin task: the response's first sentence (its headline) is the one claim, judged against the reference."""

from __future__ import annotations

from debate.claims import Extraction
from debate.plugins import EvidenceSource, StageContext, TaskInput
from debate.tasks import BaseTask, FixedEvidence, as_evidence
from debate.types import Claim, ExtractionInfo


class HeadlineTask(BaseTask):
    """the first sentence of the response vs. the reference"""

    name = "headline"

    async def claims(self, item: TaskInput, ctx: StageContext) -> Extraction:
        headline = item.response.strip().split(". ")[0].rstrip(".") + "."
        claim = Claim(id="c0", text=headline, kind="atomic")
        return Extraction([claim], ExtractionInfo(method="headline"), ["only the headline was checked"])

    def evidence(self, item: TaskInput, ctx: StageContext, notes: list[str]) -> EvidenceSource:
        return FixedEvidence(as_evidence(item.reference, item.reference_source))
