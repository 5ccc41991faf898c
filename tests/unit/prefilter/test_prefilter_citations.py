"""The citation rules, number by number."""

from __future__ import annotations

from typing import Any

import pytest

from debate.prefilter import CitationReport, citation_check, extract_citations
from debate.types import Source

LONG = "This sentence is comfortably longer than fifty characters in total"  # 66 chars without the period


def occurrences(answer: str, ids: Any) -> CitationReport:
    """The earlier variant (every valid occurrence counts, [a, b] cites two ids): its numbers are pinned below."""
    return citation_check(answer, ids, variant="occurrences")


def test_extract_citations_single_and_lists() -> None:
    assert extract_citations("A [1] and B [doc-2, doc-3]; C [x;y].") == ["1", "doc-2", "doc-3", "x", "y"]


def test_all_claims_cited_validly_is_low_risk() -> None:
    answer = "Paris is the capital of France [1]. The Seine flows through Paris [2]."
    report = occurrences(answer, ["1", "2"])
    assert report.total_claims == 2
    assert report.valid_citations == ["1", "2"] and report.invalid_citations == []
    assert report.citation_ratio == 1.0 and report.hallucination_risk_score == 0.0
    assert (report.has_hallucination_risk, report.risk_level, report.note) == (False, "low", None)


def test_parent_id_is_a_valid_citation() -> None:
    report = occurrences("The report was published in 2021 [docA].", [Source(id="docA#3", parent_id="docA")])
    assert report.valid_citations == ["docA"] and report.risk_level == "low"


def test_any_invalid_citation_is_high_risk_even_with_full_ratio() -> None:
    answer = "Paris is the capital of France [1]. The Seine flows through Paris [9]."
    report = occurrences(answer, ["1", "2"])
    assert report.invalid_citations == ["9"] and report.citation_ratio == 0.5
    assert report.hallucination_risk_score == 0.5 and report.has_hallucination_risk is True
    assert report.risk_level == "high"


def test_one_uncited_long_sentence_is_moderate() -> None:
    answer = f"Paris is the capital of France [1]. The Seine flows through Paris [1]. {LONG}. Also cited here ok [2]."
    report = occurrences(answer, ["1", "2"])
    assert report.total_claims == 4 and len(report.valid_citations) == 3
    assert report.citation_ratio == 0.75 and report.hallucination_risk_score == pytest.approx(0.25)
    assert report.uncited_sentences == [f"{LONG}."]
    assert (report.has_hallucination_risk, report.risk_level) == (False, "moderate")


def test_score_between_03_and_06_is_moderate() -> None:
    answer = "Paris is the capital of France [1]. The Seine flows through Paris today."
    report = occurrences(answer, ["1"])
    assert report.citation_ratio == 0.5 and report.uncited_sentences == []  # 38 chars: not a long sentence
    assert report.hallucination_risk_score == 0.5 and report.risk_level == "moderate"


def test_score_above_06_is_high() -> None:
    answer = "Paris is the capital of France [1]. The Seine flows through Paris. Lyon lies on the Rhone river."
    report = occurrences(answer, ["1"])
    assert report.citation_ratio == pytest.approx(1 / 3) and report.hallucination_risk_score == pytest.approx(2 / 3)
    assert report.risk_level == "high"


def test_three_uncited_long_sentences_are_high() -> None:
    answer = f"{LONG} [1] [1] [1] [1]. {LONG} one. {LONG} two. {LONG} three."
    report = occurrences(answer, ["1"])
    assert report.citation_ratio == 1.0 and report.hallucination_risk_score == 0.0
    assert len(report.uncited_sentences) == 3 and report.risk_level == "high"


def test_low_ratio_with_three_claims_is_high() -> None:
    # 4 valid citations over 14 claims: ratio 0.286 (< 0.3), score 0.714 (> 0.6).
    body = " ".join(f"Claim number {i} is about twenty chars." for i in range(13))
    report = occurrences(f"First claim cites all four [1][2][3][4]. {body}", ["1", "2", "3", "4"])
    assert report.total_claims == 14 and report.citation_ratio == pytest.approx(4 / 14)
    assert report.risk_level == "high"


def test_ratio_is_capped_at_one() -> None:
    report = occurrences("One long enough claim here [1][2][3].", ["1", "2", "3"])
    assert report.citation_ratio == 3.0 and report.hallucination_risk_score == 0.0


@pytest.mark.parametrize(
    ("answer", "why"),
    [("", "Answer is empty"), ("   \n ", "Answer is empty"), ("Yes [1]. Sure.", "No valid claims found")],
)
def test_nothing_to_check_is_never_a_finding(answer: str, why: str) -> None:
    report = occurrences(answer, ["1"])
    assert report.hallucination_risk_score == 0.0 and report.has_hallucination_risk is False
    assert report.risk_level == "none" and report.total_claims == 0
    assert report.note is not None and report.note.startswith(why)  # seed 000's notes


def test_seed_counts_distinct_valid_ids() -> None:
    """Four sentences citing [1]: one distinct valid id over four claims, ratio 0.25, high risk (set semantics)."""
    answer = " ".join(f"Sentence number {i} states a fact about the topic [1]." for i in range(4))
    seed = citation_check(answer, ["1"])
    assert seed.valid_citations == ["1"] and seed.total_claims == 4
    assert seed.citation_ratio == 0.25 and seed.hallucination_risk_score == 0.75 and seed.risk_level == "high"
    assert occurrences(answer, ["1"]).citation_ratio == 1.0  # the earlier variant counted every occurrence


def test_seed_takes_the_bracket_content_as_one_id_and_splits_at_punctuation() -> None:
    report = citation_check("Paris is the capital of France [1, 2]. It is on the Seine!", ["1", "2"])
    assert report.invalid_citations == ["1, 2"] and report.valid_citations == [] and report.risk_level == "high"
    # [.!?]+ splits "e.g." too: "Cities, e" is too short to be a claim, the rest is one.
    split = citation_check("Cities, e.g. Paris and Lyon, are large and old [1].", ["1"])
    assert split.total_claims == 1 and split.valid_citations == ["1"]
