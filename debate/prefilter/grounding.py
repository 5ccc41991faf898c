"""Logprob grounding (Strawberry-style): does the claim's probability depend on its cited evidence?

p1 = P(YES | full context), p0 = P(YES | context with the cited sources replaced by [REDACTED]), both read from the
endpoint's token logprobs for a one-token YES/NO/UNSURE answer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.llm import ChatClient, ChatMessage, ChatRequest, ChatResponse
from debate.prefilter.citations import extract_citations
from debate.prompts import load_prompt
from debate.retrieval import split_sentences
from debate.types import GroundingBand, GroundingResult, Usage

__all__ = [
    "ClaimGrounding",
    "GroundingResult",
    "LogprobGroundingCheck",
    "ResponseGrounding",
    "grounding_score",
    "kl_bernoulli",
    "yes_probability",
]

log = logging.getLogger(__name__)

_EPS = 1e-12
_LN2 = math.log(2.0)


def kl_bernoulli(p: float, q: float) -> float:
    """KL(Ber(p) || Ber(q)) in nats, both clipped to [1e-12, 1 - 1e-12]."""
    p = min(max(p, _EPS), 1.0 - _EPS)
    q = min(max(q, _EPS), 1.0 - _EPS)
    return p * math.log(p / q) + (1.0 - p) * math.log((1.0 - p) / (1.0 - q))


def _band(gap_bits: float) -> GroundingBand:
    if gap_bits < 0:
        return "supported"
    if gap_bits <= 2:
        return "minor extrapolation"
    if gap_bits <= 10:
        return "suspicious"
    return "likely hallucination"


def grounding_score(
    p1: float, p0: float, has_citations: bool, *, target: float = 0.95, unit: Literal["bits", "nats"] = "bits"
) -> GroundingResult:
    """Both signals from the two probabilities (formulas in the field docs)."""
    use = max(0.0, p1 - p0)
    if has_citations:
        confidence = min(1.0, 1.5 * use + (0.3 if p1 > 0.7 else 0.0))
    else:
        confidence = p1 * 0.7 if p1 > 0.7 else p1 * 0.4
    observed_nats = kl_bernoulli(p1, p0)
    required_nats = kl_bernoulli(target, p0)
    gap_nats = required_nats - observed_nats
    gap_bits = gap_nats / _LN2
    return GroundingResult(
        p1=p1,
        p0=p0,
        has_citations=has_citations,
        evidence_use=use,
        confidence=confidence,
        grounded=confidence > 0.45 and (use > 0.15 or not has_citations),
        observed_bits=observed_nats / _LN2,
        required_bits=required_nats / _LN2,
        budget_gap=gap_bits if unit == "bits" else gap_nats,
        unit=unit,
        budget_gap_bits=gap_bits,
        flagged=gap_bits > 0,
        band=_band(gap_bits),
    )


def yes_probability(response: ChatResponse) -> float | None:
    """P(YES) at the first generated token: the summed probability of YES-spelled alternatives among its top
    logprobs (0 when none is among them). None when the endpoint returned no logprobs."""
    if not response.logprobs:
        return None
    first = response.logprobs[0]
    alternatives = {alt.token: alt.logprob for alt in first.top}
    alternatives.setdefault(first.token, first.logprob)
    return min(1.0, sum(math.exp(lp) for token, lp in alternatives.items() if token.strip().upper() == "YES"))


class ClaimGrounding(BaseModel):
    """One checked sentence of a response."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claim: str
    """The sentence."""
    citations: list[str]
    """Ids it cites (known sources only)."""
    result: GroundingResult
    """The signals."""


class ResponseGrounding(BaseModel):
    """The grounding check over a response."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    available: bool
    """False when the endpoint returned no logprobs (the check was skipped, nothing guessed)."""
    claims: list[ClaimGrounding]
    """Checked claims (>= 15 characters, at most max_claims)."""
    skipped: int = 0
    """Sentences not checked (too short, or beyond max_claims)."""
    grounded: bool | None
    """>= 70% of checked claims grounded; None when nothing was checked."""
    note: str | None = None
    """Why the check was skipped or partial."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of the check."""


def _context(sources: Mapping[str, str], redacted: Sequence[str]) -> str:
    return "\n".join(f"[{sid}] {'[REDACTED]' if sid in redacted else text}" for sid, text in sources.items())


class LogprobGroundingCheck:
    """Asks the endpoint one-token YES/NO/UNSURE questions and reads P(YES) from its logprobs."""

    def __init__(self, client: ChatClient, *, max_claims: int = 10, min_chars: int = 15, target: float = 0.95,
                 top_logprobs: int = 10) -> None:  # fmt: skip
        self._client = client
        self._max_claims = max_claims
        self._min_chars = min_chars
        self._target = target
        self._top = top_logprobs
        self._prompt = load_prompt("grounding")
        self._warned = False

    @property
    def prompt_hash(self) -> str:
        return self._prompt.sha256

    async def probability(self, claim: str, context: str) -> tuple[float | None, Usage]:
        system, user = self._prompt.render(context=context or "(no context)", claim=claim)
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        response = await self._client.complete(
            ChatRequest(messages=messages, logprobs=True, top_logprobs=self._top, max_tokens=1)
        )
        return yes_probability(response), response.usage

    async def check_claim(
        self, claim: str, citations: Sequence[str], sources: Mapping[str, str]
    ) -> tuple[GroundingResult | None, Usage]:
        """Signals for one claim; None when the endpoint gives no logprobs."""
        cited = [c for c in dict.fromkeys(citations) if c in sources]
        p1, usage = await self.probability(claim, _context(sources, []))
        if p1 is None:
            return None, usage
        if cited:
            p0, more = await self.probability(claim, _context(sources, cited))
            usage = usage + more
            if p0 is None:
                return None, usage
        else:
            p0 = p1
        return grounding_score(p1, p0, bool(cited), target=self._target), usage

    async def check(self, response: str, sources: Mapping[str, str]) -> ResponseGrounding:
        """Check each sentence of `response` (claims of >= min_chars characters, at most max_claims)."""
        sentences = split_sentences(response)
        eligible = [s for s in sentences if len(s) >= self._min_chars]
        chosen = eligible[: self._max_claims]
        skipped = len(sentences) - len(chosen)
        results: list[ClaimGrounding] = []
        usage = Usage()
        for sentence in chosen:
            citations = [c for c in extract_citations(sentence) if c in sources]
            result, spent = await self.check_claim(sentence, citations, sources)
            usage = usage + spent
            if result is None:
                if not self._warned:
                    log.warning("the endpoint returned no logprobs; the logprob grounding check is skipped")
                    self._warned = True
                return ResponseGrounding(
                    available=False,
                    claims=[],
                    skipped=len(sentences),
                    grounded=None,
                    note="the endpoint returned no logprobs; grounding check skipped",
                    usage=usage,
                )
            results.append(ClaimGrounding(claim=sentence, citations=citations, result=result))
        grounded = None if not results else sum(r.result.grounded for r in results) / len(results) >= 0.7
        note = (
            f"{skipped} sentences not checked (shorter than {self._min_chars} characters or beyond {self._max_claims})"
            if skipped
            else None
        )
        return ResponseGrounding(
            available=True, claims=results, skipped=skipped, grounded=grounded, note=note, usage=usage
        )
