"""dialogue (HaluEval dialogue): the subjective filter first (paper Table 9; `None` means nothing factual is
left), then claim extraction; the knowledge and the dialogue history are the evidence."""

from __future__ import annotations

import dataclasses

from debate.claims import SubjectiveFilter
from debate.config import VerifierConfig
from debate.plugins import Plan, StageContext, TaskInput, TaskWork
from debate.tasks._common import FixedEvidence, as_evidence, extract_claims, extraction_work, given_claims
from debate.types import Evidence


class DialogueTask:
    """subjective filter, then claims; evidence: the knowledge, then the dialogue history (`question`)."""

    name = "dialogue"

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        given = as_evidence(item.reference, item.reference_source)
        if item.question and item.question.strip():
            given.append(Evidence(text=item.question.strip(), source="dialogue_history", kind="dialogue_history"))
        evidence = FixedEvidence(given)
        claims = given_claims(item)
        if claims is not None:
            return Plan(claims.claims, claims.info, evidence)
        filtered = await SubjectiveFilter(
            ctx.client, max_retries=ctx.config.claims.max_parse_retries, prompts_dir=ctx.prompts_dir
        ).filter(item.response, history=item.question)
        if filtered.text is None:
            info = filtered.info.model_copy(update={"filtered_response": None})
            return Plan([], info, evidence, ["nothing factual is left after removing subjective content"])
        extraction = await extract_claims(filtered.text, context=item.question, ctx=ctx)
        info = extraction.info.model_copy(
            update={
                "method": f"subjective-filter+{extraction.info.method}",
                "prompts": {**filtered.info.prompts, **extraction.info.prompts},
                "attempts": filtered.info.attempts + extraction.info.attempts,
                "parse_errors": filtered.info.parse_errors + extraction.info.parse_errors,
                "usage": filtered.info.usage + extraction.info.usage,
                "filtered_response": filtered.text,
            }
        )
        return Plan(extraction.claims, info, evidence, list(extraction.notes))

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        """The subjective filter, then the extraction: two calls; the evidence is the knowledge and history."""
        work = extraction_work(item, config, calls=2)
        chars = sum(len(e.text) for e in as_evidence(item.reference, None)) + len(item.question or "")
        return dataclasses.replace(work, evidence_chars=chars)
