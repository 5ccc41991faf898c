"""Logprob grounding (Strawberry-style): does the claim's probability depend on its cited evidence?

p1 = P(YES | full context), p0 = P(YES | context with the cited sources replaced by [REDACTED]), both read from the
endpoint's token logprobs for a one-token YES/NO/UNSURE answer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from debate.config import VerifierConfig
from debate.llm import ChatClient, ChatMessage, ChatRequest, ChatResponse
from debate.prefilter.citations import known_source_ids
from debate.prompts import load_prompt
from debate.sentences import guess_language
from debate.stages import PREFILTERS, Plan, StageContext
from debate.types import (
    Claim,
    ClaimVerdict,
    Evidence,
    GroundedClaim,
    GroundingBand,
    GroundingResult,
    HallucinationCheck,
    PrefilterDecision,
    ResponseCheck,
    RiskLevel,
    Usage,
)

__all__ = [
    "GROUNDED_SHARE",
    "WARNING_LANGUAGES",
    "GroundingResult",
    "LogprobGroundingCheck",
    "LogprobPrefilter",
    "claim_warning",
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
    p1: float, p0: float, has_citations: bool, *, target: float = 0.95, unit: Literal["bits", "nats"] = "nats",
    budget: Literal["seed", "strawberry"] = "seed",
) -> GroundingResult:  # fmt: skip
    """Both signals from the two probabilities (formulas in the field docs). `flagged` means not grounded.

    budget seed (default, seed 002 "KL Divergence Calculation"): observed = KL(Ber(p1) || Ber(0.5)), required =
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
"""The seed's per-claim warning, in English (seed 002 "Response Format")."""

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
    when the answer is overall grounded (seed 002 "Response Format"); the warnings are in `language` (the seed's
    own Hebrew for he, English otherwise)."""
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
        overall_grounded=bool(claims) and ratio >= GROUNDED_SHARE, grounded_claims=grounded,
        total_claims=len(claims), grounding_ratio=ratio, claims=claims,
        warning=response_warning(ungrounded, language) if ungrounded else None,
    )  # fmt: skip


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


def _context(sources: Mapping[str, str], redacted: Sequence[str]) -> str:
    return "\n".join(f"[{sid}] {'[REDACTED]' if sid in redacted else text}" for sid, text in sources.items())


class LogprobGroundingCheck:
    """Asks the endpoint one-token YES/NO/UNSURE questions and reads P(YES) from its logprobs."""

    def __init__(self, client: ChatClient, *, target: float = 0.95, top_logprobs: int = 10,
                 prompts_dir: str | None = None, budget: Literal["seed", "strawberry"] = "seed",
                 unit: Literal["nats", "bits"] = "nats") -> None:  # fmt: skip
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
        self, claim: str, citations: Sequence[str], sources: Mapping[str, str], *, site: str | None = None,
        invalid: Sequence[str] = (),
    ) -> tuple[GroundingResult | None, Usage]:  # fmt: skip
        """Signals for one claim; None when the endpoint gives no logprobs. The calls' sites are `site` + ":p1" and
        ":p0"."""
        p1, usage = await self.probability(claim, _context(sources, []), site=site and f"{site}:p1")
        if p1 is None:
            return None, usage
        result, more = await self.score(claim, p1, citations, sources, site=site, invalid=invalid)
        return result, usage + more

    async def score(
        self, claim: str, p1: float, citations: Sequence[str], sources: Mapping[str, str], *, site: str | None = None,
        invalid: Sequence[str] = (),
    ) -> tuple[GroundingResult | None, Usage]:  # fmt: skip
        """The grounding result given P(yes) with every source (`p1`): the second call, with the cited sources
        redacted. An uncited claim has nothing to redact and still gets its second call, as the seed makes two
        calls per claim (seed 002 "Cost Considerations"); at a sampling temperature the two can differ.

        `invalid`: the claim's cited ids that name no given source. The claim cites (its confidence is a cited
        claim's), nothing of it can be redacted, and it is never grounded: a missing source supports nothing."""
        cited = [c for c in dict.fromkeys(citations) if c in sources]
        p0, usage = await self.probability(claim, _context(sources, cited), site=site and f"{site}:p0")
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


_NO_LOGPROBS = "the endpoint returned no logprobs; the logprob check is skipped"
_CANNOT_DECIDE = (
    "not run: outside RAG answers the logprob check can only decide a claim, and it decides nothing without "
    "trust_grounded (--trust-grounded)"
)


class LogprobPrefilter:
    """Logprob grounding: with `trust_grounded`, a strongly grounded claim is decided factual without a debate.

    On RAG answers every claim is scored (the seed's hallucination_check block reports them all). Elsewhere the check
    only runs to decide, and skips the calls that cannot: see `check`."""

    name = "logprob"

    def __init__(self, ctx: StageContext) -> None:
        self._config = ctx.config.prefilter
        self._check = LogprobGroundingCheck(
            ctx.client, target=self._config.target, top_logprobs=self._config.top_logprobs,
            prompts_dir=ctx.prompts_dir, budget=self._config.budget, unit=self._config.budget_unit,
        )  # fmt: skip
        self._language = ctx.config.language
        self.logprobs_unavailable = False

    def prompt_hashes(self) -> dict[str, str]:
        return {"grounding": self._check.prompt_hash}

    @staticmethod
    def expected_calls(claims: float, config: VerifierConfig) -> tuple[float, float]:
        """Model calls per response (`--estimate`): none when a claim cannot be decided by grounding, up to two
        one-token calls for each of the first max_claims claims."""
        return 0.0, 2.0 * min(claims, config.prefilter.max_claims)

    def _beyond(self) -> str:
        return f"beyond the first {self._config.max_claims} claims of the response"

    def _no_logprobs(self, usage: Usage) -> PrefilterDecision:
        if not self.logprobs_unavailable:
            log.warning(_NO_LOGPROBS)
        self.logprobs_unavailable = True
        return self._skip(_NO_LOGPROBS, usage)

    def _skip(self, reason: str, usage: Usage | None = None) -> PrefilterDecision:
        return PrefilterDecision(name=self.name, decision="skipped", reason=reason, usage=usage or Usage())

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        cfg = self._config
        if self.logprobs_unavailable:
            return self._skip(_NO_LOGPROBS)
        site = f"{claim.id}:grounding"
        if len(claim.text) < cfg.min_chars:
            return self._skip(f"shorter than {cfg.min_chars} characters")
        if index >= cfg.max_claims:
            return self._skip(self._beyond())
        if plan.sources is not None:
            context = {s.id: s.text for s in plan.sources}
            cited = set(claim.citations)
            cited_ids = [
                s.id for s in plan.sources if s.id in cited or (s.parent_id is not None and s.parent_id in cited)
            ]
            known = known_source_ids(plan.sources)
            invalid = [c for c in claim.citations if c not in known]
            result, usage = await self._check.check_claim(claim.text, cited_ids, context, site=site, invalid=invalid)
        else:
            # Outside RAG answers the check's only use is deciding (there is no grounding report to fill), so it
            # makes no call that cannot change a decision: none at all without trust_grounded, none when no P(yes)
            # could reach the threshold, and no second call when the first already rules it out.
            if not cfg.trust_grounded:
                return self._skip(_CANNOT_DECIDE)
            # The claim's evidence plays the cited sources: does it raise P(YES)?
            context = {f"E{i}": e.text for i, e in enumerate(evidence, start=1)}
            cited_ids = list(context)
            if max_confidence(1.0, bool(cited_ids)) < cfg.grounded_confidence:
                return self._skip(f"no evidence: confidence cannot reach {cfg.grounded_confidence}")
            p1, usage = await self._check.probability(claim.text, _context(context, []), site=f"{site}:p1")
            if p1 is None:
                return self._no_logprobs(usage)
            if max_confidence(p1, bool(cited_ids)) < cfg.grounded_confidence:
                reason = f"p1={p1:.3f}: confidence cannot reach {cfg.grounded_confidence}; no second call made"
                return self._skip(reason, usage)
            result, more = await self._check.score(claim.text, p1, cited_ids, context, site=site)
            usage = usage + more
        if result is None:
            return self._no_logprobs(usage)
        summary = (
            f"p1={result.p1:.3f} p0={result.p0:.3f} confidence={result.confidence:.2f} "
            f"grounded={result.grounded} budget gap={result.budget_gap:.2f} {result.unit}"
            + (f" ({result.band})" if result.band else "")
            + (f"; cites source(s) that were not given: {', '.join(result.invalid_citations)}"
               if result.invalid_citations else "")
        )  # fmt: skip
        if cfg.trust_grounded and result.grounded and result.confidence >= cfg.grounded_confidence:
            return PrefilterDecision(
                name=self.name, decision="factual", reason=f"strongly grounded: {summary}", error_severity=0,
                grounding=result, usage=usage,
            )  # fmt: skip
        return PrefilterDecision(name=self.name, decision="pass", reason=summary, grounding=result, usage=usage)

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        return None

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        response = " ".join(c.text for c in plan.claims)
        block = response_hallucination_check(verdicts, plan, warning_language(self._language, response))
        if block is None:
            return None
        risk: RiskLevel = "low" if block.overall_grounded else "high"
        reason = block.warning or f"{block.grounded_claims} of {block.total_claims} claims grounded"
        beyond = sum(1 for v in verdicts for d in v.prefilters if d.name == self.name and d.reason == self._beyond())
        if beyond:
            reason += f"; {beyond} claim(s) beyond the first {self._config.max_claims} were not scored (the cap)"
        return ResponseCheck(name=self.name, risk_level=risk, reason=reason, hallucination_check=block)

    def note(self) -> str | None:
        return _NO_LOGPROBS if self.logprobs_unavailable else None


PREFILTERS.register("logprob", LogprobPrefilter)
