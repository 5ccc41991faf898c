"""The RAG citation rules' monitoring figures ("日誌和監控": average risk score, high-risk answer share,
invalid-citation and uncited-claim frequency) over the RAG answers of a results log."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean

from pydantic import BaseModel, ConfigDict, Field

from debate.results._records import Record, ResultRecord
from debate.types import CitationReport, Report

__all__ = ["RagMonitoring", "rag_monitoring"]


class RagMonitoring(BaseModel):
    """The figures over the RAG answers whose citations the rules checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    answers: int = Field(ge=0)
    """RAG answers with a citation report (empty or claim-less answers included: risk 0, as the seed scores them)."""
    average_risk_score: float | None
    """Mean rules hallucination_risk_score."""
    high_risk_share: float | None
    """Share of answers whose response risk (rules and judge combined) is high."""
    invalid_citation_frequency: float | None
    """Share of answers citing at least one id that was not given."""
    invalid_citations_per_answer: float | None
    """Mean number of invalid ids per answer."""
    uncited_frequency: float | None
    """Share of answers with at least one uncited long sentence."""
    uncited_sentences_per_answer: float | None
    """Mean number of uncited long sentences per answer."""
    average_judge_risk: float | None = None
    """Mean judge hallucination_risk over the answers the judge rated (None when it rated none)."""
    judged: int = Field(default=0, ge=0)
    """Answers the judge rated."""
    skipped: int = Field(default=0, ge=0)
    """Records without a RAG citation report (errors, other tasks, runs without the rules)."""


def _share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _uncited(report: CitationReport) -> int:
    # Reports written before uncited_count existed listed every uncited sentence.
    return max(report.uncited_count, len(report.uncited_sentences))


def rag_monitoring(records: Iterable[Record]) -> RagMonitoring:
    """The figures over a results log's records (`debate verify --input ... --output`)."""
    reports: list[Report] = []
    skipped = 0
    for record in records:
        report = record.result if isinstance(record, ResultRecord) else None
        if report is None or report.prefilter is None or report.prefilter.citation is None:
            skipped += 1
            continue
        reports.append(report)
    citations = [r.prefilter.citation for r in reports if r.prefilter and r.prefilter.citation]
    judge = [
        j.rubric.hallucination_risk
        for r in reports
        if r.prefilter and (j := r.prefilter.judge) is not None and j.rubric is not None
    ]
    return RagMonitoring(
        answers=len(citations),
        average_risk_score=_mean([c.hallucination_risk_score for c in citations]),
        high_risk_share=_share([r.prefilter.risk_level == "high" for r in reports if r.prefilter]),
        invalid_citation_frequency=_share([bool(c.invalid_citations) for c in citations]),
        invalid_citations_per_answer=_mean([float(len(c.invalid_citations)) for c in citations]),
        uncited_frequency=_share([_uncited(c) > 0 for c in citations]),
        uncited_sentences_per_answer=_mean([float(_uncited(c)) for c in citations]),
        average_judge_risk=_mean(judge),
        judged=len(judge),
        skipped=skipped,
    )
