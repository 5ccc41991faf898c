"""The prefilter cascade: cheap checks first; a claim skips the debate only when a check is confident."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from debate.config import PrefilterConfig
from debate.llm import ChatClient
from debate.prefilter.citations import citation_check
from debate.prefilter.grounding import LogprobGroundingCheck
from debate.types import (
    CitationReport,
    Claim,
    ClaimVerdict,
    DecidedBy,
    Evidence,
    Opinion,
    PrefilterDecision,
    PrefilterSummary,
    Source,
    Usage,
)

__all__ = ["INVALID_CITATION_SEVERITY", "Cascade", "Decided", "cited_sources", "sources_from"]

log = logging.getLogger(__name__)

INVALID_CITATION_SEVERITY = 4
"""A claim that cites a source that was never given is decided non-factual with this severity (0-5 rubric)."""

_NO_LOGPROBS = "the endpoint returned no logprobs; the logprob check is skipped"


@dataclass(frozen=True)
class Decided:
    """A prefilter's confident verdict."""

    by: DecidedBy
    factual: bool
    severity: int

    @property
    def opinion(self) -> Opinion:
        return Opinion(opinion=f"decided by {self.by}", factuality=self.factual, error_severity=self.severity)


class Cascade:
    """Runs the configured prefilters on each claim; shared by all claims of a Verifier."""

    def __init__(self, *, client: ChatClient, config: PrefilterConfig, min_rounds: int) -> None:
        self.config = config
        self._min_rounds = min_rounds
        self._grounding = LogprobGroundingCheck(
            client,
            max_claims=config.max_claims,
            min_chars=config.min_chars,
            target=config.target,
            top_logprobs=config.top_logprobs,
        )
        self.logprobs_unavailable = False

    @property
    def enabled(self) -> bool:
        return self.config.mode != "none"

    @property
    def prompt_hash(self) -> str:
        return self._grounding.prompt_hash

    def _rules(self, claim: Claim, known: set[str] | None) -> tuple[PrefilterDecision, Decided | None]:
        if known is None:
            return PrefilterDecision(name="rules", decision="skipped", reason="no cited sources to check"), None
        invalid = [c for c in claim.citations if c not in known]
        if invalid and self.config.invalid_citation_decides:
            reason = f"cites source(s) that were not given: {', '.join(invalid)}"
            decision = PrefilterDecision(name="rules", decision="non_factual", reason=reason)
            return decision, Decided("prefilter:rules", False, INVALID_CITATION_SEVERITY)
        if not claim.citations:
            return PrefilterDecision(name="rules", decision="pass", reason="the claim cites no source"), None
        return PrefilterDecision(name="rules", decision="pass", reason="every citation names a given source"), None

    async def _logprob(
        self, claim: Claim, index: int, evidence: Sequence[Evidence], sources: Sequence[Source] | None
    ) -> tuple[PrefilterDecision, Decided | None]:
        cfg = self.config
        if self.logprobs_unavailable:
            return PrefilterDecision(name="logprob", decision="skipped", reason=_NO_LOGPROBS), None
        if len(claim.text) < cfg.min_chars:
            reason = f"shorter than {cfg.min_chars} characters"
            return PrefilterDecision(name="logprob", decision="skipped", reason=reason), None
        if index >= cfg.max_claims:
            reason = f"beyond the first {cfg.max_claims} claims of the response"
            return PrefilterDecision(name="logprob", decision="skipped", reason=reason), None
        if sources is not None:
            context = {s.id: s.text for s in sources}
            cited = [s.id for s in cited_sources(sources, claim)]
        else:
            # Outside RAG, the claim's evidence plays the cited sources: does it raise P(YES)?
            context = {f"E{i}": e.text for i, e in enumerate(evidence, start=1)}
            cited = list(context)
        result, usage = await self._grounding.check_claim(claim.text, cited, context)
        if result is None:
            if not self.logprobs_unavailable:
                log.warning(_NO_LOGPROBS)
            self.logprobs_unavailable = True
            return PrefilterDecision(name="logprob", decision="skipped", reason=_NO_LOGPROBS, usage=usage), None
        summary = (
            f"p1={result.p1:.3f} p0={result.p0:.3f} confidence={result.confidence:.2f} "
            f"grounded={result.grounded} budget gap={result.budget_gap_bits:.2f} bits ({result.band})"
        )
        if cfg.trust_grounded and result.grounded and result.confidence >= cfg.grounded_confidence:
            decision = PrefilterDecision(
                name="logprob",
                decision="factual",
                reason=f"strongly grounded: {summary}",
                grounding=result,
                usage=usage,
            )
            return decision, Decided("prefilter:logprob", True, 0)
        return PrefilterDecision(name="logprob", decision="pass", reason=summary, grounding=result, usage=usage), None

    async def run(
        self, claim: Claim, index: int, evidence: Sequence[Evidence], sources: Sequence[Source] | None
    ) -> tuple[list[PrefilterDecision], Decided | None]:
        """The decisions for one claim, and the verdict when one was confident."""
        mode = self.config.mode
        decisions: list[PrefilterDecision] = []
        if mode in ("rules", "all"):
            known = _known(sources) if sources is not None else None
            decision, decided = self._rules(claim, known)
            decisions.append(decision)
            if decided is not None:
                return decisions, decided
        if mode in ("logprob", "all"):
            decision, decided = await self._logprob(claim, index, evidence, sources)
            decisions.append(decision)
            if decided is not None:
                return decisions, decided
        return decisions, None

    def summary(
        self, claims: Sequence[ClaimVerdict], *, response: str, sources: Sequence[Source] | None
    ) -> PrefilterSummary | None:
        mode = self.config.mode
        if mode == "none":
            return None
        citation: CitationReport | None = None
        if mode in ("rules", "all") and sources is not None:
            citation = citation_check(response, [s.id for s in sources] + [s.parent_id for s in sources if s.parent_id])
        decided = sum(1 for c in claims if c.decided_by != "debate")
        calls = Usage.total(d.usage for c in claims for d in c.prefilters).llm_calls
        return PrefilterSummary(
            mode=mode,
            citation=citation,
            decided=decided,
            prefilter_calls=calls,
            debate_calls_saved=decided * (1 + 3 * self._min_rounds),
            note=_NO_LOGPROBS if self.logprobs_unavailable and mode in ("logprob", "all") else None,
        )


def cited_sources(sources: Sequence[Source], claim: Claim) -> list[Source]:
    """The sources a claim cites, by their own id or their parent's."""
    cited = set(claim.citations)
    return [s for s in sources if s.id in cited or (s.parent_id is not None and s.parent_id in cited)]


def _known(sources: Sequence[Source]) -> set[str]:
    return {s.id for s in sources} | {s.parent_id for s in sources if s.parent_id}


def sources_from(reference: Mapping[str, str] | Sequence[Source] | Sequence[Mapping[str, str]]) -> list[Source]:
    """RAG sources from {id: text} or a list of {id, text, parent_id}."""
    if isinstance(reference, Mapping):
        return [Source(id=str(k), text=str(v)) for k, v in reference.items()]
    return [s if isinstance(s, Source) else Source.model_validate(s) for s in reference]
