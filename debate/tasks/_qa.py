"""qa (HaluEval QA): the question and answer together are one claim; the knowledge is its evidence."""

from __future__ import annotations

from debate.claims import qa_claim
from debate.config import VerifierConfig
from debate.plugins import Plan, StageContext, TaskInput, TaskWork
from debate.tasks._common import FixedEvidence, as_document, as_evidence, extraction_work, given_claims
from debate.types import ExtractionInfo


class QATask:
    """question + answer form one claim (no model call); `reference` is the knowledge."""

    name = "qa"

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        evidence = FixedEvidence(as_evidence(item.reference, item.reference_source))
        given = given_claims(item)
        if given is not None:
            return Plan(given.claims, given.info, evidence)
        claim = qa_claim(question=item.question, answer=item.response)
        return Plan([claim], ExtractionInfo(method="qa-pair"), evidence)

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        if item.claims is not None:
            return extraction_work(item, config)
        claim = qa_claim(question=item.question, answer=item.response)
        document = as_document(item.reference)
        return TaskWork(claims=1, claim_chars=len(claim.text), evidence_chars=len(document or ""))
