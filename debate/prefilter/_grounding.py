"""Logprob grounding (Strawberry-style): does the claim's probability depend on its cited evidence?

p1 = P(YES | full context), p0 = P(YES | context with the cited sources replaced by [REDACTED]), both read from the
endpoint's token logprobs for a one-token YES/NO/UNSURE answer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from debate.calls import load_prompt
from debate.llm import ChatClient, ChatMessage, ChatRequest, ChatResponse
from debate.plugins import Plan
from debate.sentences import guess_language
from debate.types import (
    ClaimVerdict,
    GroundedClaim,
    GroundingBand,
    GroundingResult,
    HallucinationCheck,
    Usage,
)

__all__ = [
    "GROUNDED_SHARE",
    "WARNING_LANGUAGES",
    "GroundingResult",
    "LogprobGroundingCheck",
    "claim_warning",
    "context_with_sources",
    "grounding_score",
    "hallucination_check",
    "kl_bernoulli",
    "max_confidence",
    "response_warning",
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
    p1: float,
    p0: float,
    has_citations: bool,
    *,
    target: float = 0.95,
    unit: Literal["bits", "nats"] = "nats",
    budget: Literal["seed", "strawberry"] = "seed",
) -> GroundingResult:
    """Both signals from the two probabilities (formulas in the field docs). `flagged` means not grounded.

    budget seed (default, Strawberry grounding "KL Divergence Calculation"): observed = KL(Ber(p1) || Ber(0.5)),
    required =
    KL(Ber(p1) || Ber(p0)), gap = observed - required, no bands: the gap is reported, the decision is `grounded`.
    The source computes the KL with the natural logarithm and calls it bits: the gap is in nats by default (`unit`),
    observed_bits / required_bits / budget_gap_bits divide by ln 2.
    budget strawberry (a named departure, the Strawberry paper's budget): observed = KL(Ber(p1) || Ber(p0)),
    required = KL(Ber(target) || Ber(p0)), gap = required - observed, read through the paper's bands."""
    use = max(0.0, p1 - p0)
    if has_citations:
        confidence = min(1.0, 1.5 * use + (0.3 if p1 > 0.7 else 0.0))
    else:
        confidence = p1 * 0.7 if p1 > 0.7 else p1 * 0.4
    grounded = confidence > 0.45 and (use > 0.15 or not has_citations)
    band: GroundingBand | None = None
    if budget == "seed":
        observed_nats, required_nats = kl_bernoulli(p1, 0.5), kl_bernoulli(p1, p0)
        gap_nats = observed_nats - required_nats
    else:
        observed_nats, required_nats = kl_bernoulli(p1, p0), kl_bernoulli(target, p0)
        gap_nats = required_nats - observed_nats
        band = _band(gap_nats / _LN2)
    gap_bits = gap_nats / _LN2
    return GroundingResult(
        p1=p1,
        p0=p0,
        has_citations=has_citations,
        evidence_use=use,
        confidence=confidence,
        grounded=grounded,
        budget=budget,
        observed_bits=observed_nats / _LN2,
        required_bits=required_nats / _LN2,
        budget_gap=gap_bits if unit == "bits" else gap_nats,
        unit=unit,
        budget_gap_bits=gap_bits,
        flagged=not grounded,
        band=band,
    )


GROUNDED_SHARE = 0.7
"""An answer is overall grounded when at least this share of its scored claims is grounded."""


CLAIM_WARNING = "no sufficient source was found for this claim"
"""The seed's per-claim warning, in English (Strawberry grounding "Response Format")."""

# The source's own Hebrew warnings, word for word, and our English rendering of them.
_WARNINGS: dict[str, tuple[str, str]] = {
    "en": (CLAIM_WARNING, "Note: {n} claim(s) in the answer are not fully supported by the sources."),
    "he": ("לא נמצא מקור מספק", "שים לב: {n} טענות בתשובה לא נתמכות במלואן על ידי המקורות."),
}
WARNING_LANGUAGES = tuple(_WARNINGS)
"""Languages the grounding warnings are written in; any other language gets the English ones."""


def claim_warning(language: str = "en") -> str:
    """The per-claim warning in `language` (English when there is no text for it)."""
    return _WARNINGS.get(language, _WARNINGS["en"])[0]


def response_warning(ungrounded: int, language: str = "en") -> str:
    """The seed's top-level warning in `language`: how many claims the sources do not fully support."""
    return _WARNINGS.get(language, _WARNINGS["en"])[1].format(n=ungrounded)


def hallucination_check(
    scored: Sequence[tuple[str, Sequence[str], GroundingResult]], language: str = "en"
) -> HallucinationCheck:
    """The seed's response block from (claim text, cited ids, grounding result) per scored claim: every ungrounded
    claim carries the warning, and the block carries the response warning whenever any claim is ungrounded, even
    when the answer is overall grounded (Strawberry grounding "Response Format"); the warnings are in `language` (the
    seed's own Hebrew for he, English otherwise)."""
    claims = [
        GroundedClaim(
            text=text,
            citing=list(citing),
            p1=r.p1,
            p0=r.p0,
            confidence=r.confidence,
            grounded=r.grounded,
            warning=None if r.grounded else claim_warning(language),
        )
        for text, citing, r in scored
    ]
    grounded = sum(1 for c in claims if c.grounded)
    ratio = grounded / len(claims) if claims else 0.0
    ungrounded = len(claims) - grounded
    return HallucinationCheck(
        overall_grounded=bool(claims) and ratio >= GROUNDED_SHARE,
        grounded_claims=grounded,
        total_claims=len(claims),
        grounding_ratio=ratio,
        claims=claims,
        warning=response_warning(ungrounded, language) if ungrounded else None,
    )


def warning_language(configured: str | None, response: str) -> str:
    """The language of the grounding warnings: the configured one, else the response's (guessed from its script)."""
    return configured or guess_language(response)


def response_hallucination_check(
    verdicts: Sequence[ClaimVerdict], plan: Plan, language: str = "en"
) -> HallucinationCheck | None:
    """The block for a RAG answer whose claims the logprob check scored; None otherwise."""
    if plan.sources is None:
        return None
    claims = {c.id: c for c in plan.claims}
    scored = [
        (v.text, claims[v.claim_id].citations if v.claim_id in claims else [], d.grounding)
        for v in verdicts
        for d in v.prefilters
        if d.grounding is not None
    ]
    return hallucination_check(scored, language) if scored else None


def yes_probability(response: ChatResponse) -> float | None:
    """P(YES) at the first generated token: the summed probability of YES-spelled alternatives among its top
    logprobs (0 when none is among them). None when the endpoint returned no logprobs."""
    if not response.logprobs:
        return None
    first = response.logprobs[0]
    alternatives = {alt.token: alt.logprob for alt in first.top}
    alternatives.setdefault(first.token, first.logprob)
    return min(1.0, sum(math.exp(lp) for token, lp in alternatives.items() if token.strip().upper() == "YES"))


def context_with_sources(sources: Mapping[str, str], redacted: Sequence[str]) -> str:
    return "\n".join(f"[{sid}] {'[REDACTED]' if sid in redacted else text}" for sid, text in sources.items())


class LogprobGroundingCheck:
    """Asks the endpoint one-token YES/NO/UNSURE questions and reads P(YES) from its logprobs."""

    def __init__(
        self,
        client: ChatClient,
        *,
        target: float = 0.95,
        top_logprobs: int = 10,
        prompts_dir: str | None = None,
        budget: Literal["seed", "strawberry"] = "seed",
        unit: Literal["nats", "bits"] = "nats",
    ) -> None:
        self._client = client
        self._unit: Literal["nats", "bits"] = unit
        self._budget: Literal["seed", "strawberry"] = budget
        self._target = target
        self._top = top_logprobs
        self._prompt = load_prompt("grounding", prompts_dir)

    @property
    def prompt_hash(self) -> str:
        return self._prompt.sha256

    async def probability(self, claim: str, context: str, *, site: str | None = None) -> tuple[float | None, Usage]:
        """P(YES) for `claim` given `context`; `site` says where in a run the call is made (e.g. "c0:grounding:p1")."""
        system, user = self._prompt.render(context=context or "(no context)", claim=claim)
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        request = ChatRequest(
            messages=messages, logprobs=True, top_logprobs=self._top, max_tokens=1, purpose="grounding", site=site
        )
        response = await self._client.complete(request)
        return yes_probability(response), response.usage

    async def check_claim(
        self,
        claim: str,
        citations: Sequence[str],
        sources: Mapping[str, str],
        *,
        site: str | None = None,
        invalid: Sequence[str] = (),
    ) -> tuple[GroundingResult | None, Usage]:
        """Signals for one claim; None when the endpoint gives no logprobs. The calls' sites are `site` + ":p1" and
        ":p0"."""
        p1, usage = await self.probability(claim, context_with_sources(sources, []), site=site and f"{site}:p1")
        if p1 is None:
            return None, usage
        result, more = await self.score(claim, p1, citations, sources, site=site, invalid=invalid)
        return result, usage + more

    async def score(
        self,
        claim: str,
        p1: float,
        citations: Sequence[str],
        sources: Mapping[str, str],
        *,
        site: str | None = None,
        invalid: Sequence[str] = (),
    ) -> tuple[GroundingResult | None, Usage]:
        """The grounding result given P(yes) with every source (`p1`): the second call, with the cited sources
        redacted. An uncited claim has nothing to redact and still gets its second call, as the seed makes two
        calls per claim (Strawberry grounding "Cost Considerations"); at a sampling temperature the two can differ.

        `invalid`: the claim's cited ids that name no given source. The claim cites (its confidence is a cited
        claim's), nothing of it can be redacted, and it is never grounded: a missing source supports nothing."""
        cited = [c for c in dict.fromkeys(citations) if c in sources]
        p0, usage = await self.probability(claim, context_with_sources(sources, cited), site=site and f"{site}:p0")
        if p0 is None:
            return None, usage
        missing = list(dict.fromkeys(c for c in invalid if c not in sources))
        result = grounding_score(
            p1, p0, bool(cited or missing), target=self._target, budget=self._budget, unit=self._unit
        )
        if missing:
            result = result.model_copy(update={"grounded": False, "flagged": True, "invalid_citations": missing})
        return result, usage


def max_confidence(p1: float, has_citations: bool) -> float:
    """The highest grounding confidence any P(yes) without the cited sources could give, once `p1` is known: the
    confidence rises as p0 falls, so it is the confidence at p0 = 0."""
    return grounding_score(p1, 0.0, has_citations).confidence
