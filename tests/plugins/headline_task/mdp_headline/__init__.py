"""A plugin task: the response's first sentence (its headline) is the one claim, judged against the reference."""

from __future__ import annotations

from debate.plugins import Plan, StageContext, TaskInput
from debate.tasks import FixedEvidence, as_evidence
from debate.types import Claim, ExtractionInfo


class HeadlineTask:
    """the first sentence of the response vs. the reference"""

    name = "headline"

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        headline = item.response.strip().split(". ")[0].rstrip(".") + "."
        claim = Claim(id="c0", text=headline, kind="atomic")
        evidence = FixedEvidence(as_evidence(item.reference, item.reference_source))
        return Plan([claim], ExtractionInfo(method="headline"), evidence, ["only the headline was checked"])
