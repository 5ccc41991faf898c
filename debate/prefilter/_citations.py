"""Rule-based citation check for RAG answers with `[source_id]` citations."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from debate.config import VerifierConfig
from debate.plugins import Plan, StageContext
from debate.prefilter._base import BasePrefilter
from debate.sentences import split_sentences
from debate.types import (
    CitationReport,
    CitationVariant,
    Claim,
    Evidence,
    PrefilterDecision,
    ResponseCheck,
    RiskLevel,
    Source,
)

__all__ = [
    "INVALID_CITATION_SEVERITY",
    "CitationVariant",
    "RulesOptions",
    "RulesPrefilter",
    "citation_check",
    "cited_ids",
    "extract_citations",
    "known_source_ids",
    "rule_conditions",
]

INVALID_CITATION_SEVERITY = 4
"""A claim that cites a source that was never given is decided non-factual with this severity (0-5 rubric)."""


_CITATION = re.compile(r"\[([^\[\]\n]{1,200})\]")
_UNCITED_MIN_CHARS = 50
_CLAIM_MIN_CHARS = 20


def extract_citations(text: str) -> list[str]:
    """Ids cited as `[id]`; `[a, b]` and `[a; b]` cite several."""
    ids: list[str] = []
    for match in _CITATION.finditer(text):
        ids.extend(part.strip() for part in re.split(r"[,;]", match.group(1)) if part.strip())
    return ids


def known_source_ids(sources: Iterable[str | Source]) -> set[str]:
    known: set[str] = set()
    for source in sources:
        if isinstance(source, str):
            known.add(source)
        else:
            known.add(source.id)
            if source.parent_id:
                known.add(source.parent_id)
    return known


def _nothing(note: str) -> CitationReport:
    return CitationReport(
        has_hallucination_risk=False,
        hallucination_risk_score=0.0,
        risk_level="none",
        valid_citations=[],
        invalid_citations=[],
        uncited_sentences=[],
        citation_ratio=0.0,
        total_claims=0,
        note=note,
    )


_SEED_CITATION = re.compile(r"\[([^\]]+)\]")
_UNCITED_KEPT = 3
_UNCITED_CUT = 100


def cited_ids(text: str, variant: CitationVariant = "seed") -> list[str]:
    """The ids `text` cites, every occurrence in order, as the variant reads them."""
    return _SEED_CITATION.findall(text) if variant == "seed" else extract_citations(text)


def citation_check(
    answer: str, source_ids: Sequence[str | Source], *, variant: CitationVariant = "seed"
) -> CitationReport:
    """Check an answer's citations against the ids of the sources it was given (the RAG rules "規則基礎檢測").

    Risk is high when the score exceeds 0.6, or any citation is invalid, or 3 or more long sentences are uncited, or
    the ratio is below 0.3 with 3 or more claims; moderate when the score is in (0.3, 0.6] or 1-2 long sentences are
    uncited; low otherwise. An empty answer, or one with no claim, is "nothing to check", never a finding.
    """
    if not answer.strip():
        return _nothing("Answer is empty, cannot detect hallucinations")
    if variant == "seed":
        # Unstripped, like the seed: the length tests run on stripped text, the split keeps empty pieces out.
        sentences = [s.strip() for s in re.split(r"[.!?]+", answer) if s.strip()]
    else:
        sentences = split_sentences(answer)
    cited = cited_ids(answer, variant)
    claims = [s for s in sentences if len(s) > _CLAIM_MIN_CHARS]
    if not claims:
        return _nothing("No valid claims found, cannot detect hallucinations")
    known = known_source_ids(source_ids)
    valid = [c for c in cited if c in known]
    invalid = [c for c in cited if c not in known]
    if variant == "seed":
        valid, invalid = list(dict.fromkeys(valid)), list(dict.fromkeys(invalid))
    uncited = [s for s in sentences if len(s) > _UNCITED_MIN_CHARS and not cited_ids(s, variant)]
    ratio = len(valid) / max(len(claims), 1)
    score = 1.0 - min(ratio, 1.0)
    kept = [s[:_UNCITED_CUT] for s in uncited[:_UNCITED_KEPT]] if variant == "seed" else uncited
    report = CitationReport(
        has_hallucination_risk=score > 0.3,
        hallucination_risk_score=score,
        risk_level="low",
        valid_citations=valid,
        invalid_citations=invalid,
        uncited_sentences=kept,
        uncited_count=len(uncited),
        citation_ratio=ratio,
        total_claims=len(claims),
    )
    high, moderate = rule_conditions(report)
    level: RiskLevel = "high" if high else "moderate" if moderate else "low"
    return report.model_copy(update={"risk_level": level})


def rule_conditions(report: CitationReport) -> tuple[list[str], list[str]]:
    """The seed's high-risk and moderate-risk rule conditions that hold for a report (the RAG rules "判定標準"): the one
    place both the rules' level and the combined rules + judge decision read them from."""
    score, ratio, uncited = report.hallucination_risk_score, report.citation_ratio, report.uncited_count
    high = [
        *([f"risk score {score:.2f} > 0.6"] if score > 0.6 else []),
        *([f"invalid citations {report.invalid_citations}"] if report.invalid_citations else []),
        *([f"{uncited} uncited long sentences"] if uncited >= 3 else []),
        *(
            [f"citation ratio {ratio:.2f} < 0.3 with {report.total_claims} claims"]
            if ratio < 0.3 and report.total_claims >= 3
            else []
        ),
    ]
    moderate = [
        *([f"risk score {score:.2f} in (0.3, 0.6]"] if 0.3 < score <= 0.6 else []),
        *([f"{uncited} uncited long sentence(s)"] if 1 <= uncited <= 2 else []),
    ]
    return high, moderate


class RulesOptions(BaseModel):
    """The `rules` prefilter's options (`prefilter.options.rules`). Citations are read as the task reads them
    (task_options.rag.citation_variant)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    invalid_citation_decides: bool = False
    """A named departure from the RAG rules (where an invalid citation only raises the answer's risk): a claim citing
    an unknown source is also decided not factual (severity 4) without a debate."""


class RulesPrefilter(BasePrefilter[RulesOptions]):
    """Citation rules (rag task). An invalid citation raises the answer's risk (the RAG rules); with
    invalid_citation_decides (a named departure) a claim citing a source that was never given is also decided
    non-factual without a debate."""

    name = "rules"

    def __init__(self, ctx: StageContext) -> None:
        super().__init__(ctx)
        self._decides = self.options.invalid_citation_decides

    @staticmethod
    def expected_calls(claims: float, config: VerifierConfig) -> tuple[float, float]:
        """Model calls per response (`--estimate`): rules make none."""
        return 0.0, 0.0

    @staticmethod
    def may_decide(config: VerifierConfig) -> bool:
        """Whether it may decide a claim without a debate: with invalid_citation_decides."""
        return config.prefilter.options_for("rules", RulesOptions).invalid_citation_decides

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        if plan.sources is None:
            return PrefilterDecision(name=self.name, decision="skipped", reason="no cited sources to check")
        known = known_source_ids(plan.sources)
        invalid = [c for c in claim.citations if c not in known]
        if invalid and self._decides:
            reason = f"cites source(s) that were not given: {', '.join(invalid)}"
            return PrefilterDecision(
                name=self.name, decision="non_factual", reason=reason, error_severity=INVALID_CITATION_SEVERITY
            )
        if invalid:
            reason = f"cites source(s) that were not given: {', '.join(invalid)}; the answer's risk is high"
            return PrefilterDecision(name=self.name, decision="pass", reason=reason)
        if not claim.citations:
            return PrefilterDecision(name=self.name, decision="pass", reason="the claim cites no source")
        return PrefilterDecision(name=self.name, decision="pass", reason="every citation names a given source")

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        if plan.sources is None:
            return None
        report = citation_check(response, plan.sources, variant=plan.citation_variant)
        reason = report.note or (
            f"citation ratio {report.citation_ratio:.2f}, {len(report.invalid_citations)} invalid, "
            f"{report.uncited_count} long sentences uncited"
        )
        return ResponseCheck(name=self.name, risk_level=report.risk_level, reason=reason, citation=report)
