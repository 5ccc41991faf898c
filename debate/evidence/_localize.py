"""RefChecker's evidence localization (its README, "Evidence Localization"): which evidence sentences a claim's
verdict rests on, as an explanation beside the label. Where a claim sits in the response is already its `spans`.

Each element of the claim (a triplet's subject, predicate and object; otherwise the claim text) is matched against
every sentence of the claim's evidence with the run's retriever, and the best sentence per element is kept when the
retriever scores it above zero. Its role follows the claim's label: a factual claim's sentences support it, a
non-factual claim's contradict it, a not-enough-evidence claim's are only related. RefChecker slides token windows
over the reference with a RoBERTa (SimCSE) model and keeps windows above its thresholds; we rank whole sentences with
the retriever the run already uses (all-MiniLM-L6-v2 or BM25), so no other model is loaded.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from debate.plugins import Retriever
from debate.sentences import sentence_spans
from debate.types import ClaimVerdict, LocatedEvidence

__all__ = ["localize"]

_ROLES: dict[str, Literal["supports", "contradicts", "related"]] = {
    "factual": "supports",
    "non_factual": "contradicts",
    "not_enough_evidence": "related",
}


async def localize(verdict: ClaimVerdict, retriever: Retriever, language: str | None = None) -> list[LocatedEvidence]:
    """The evidence sentences `verdict` rests on; none for a claim without a label or without evidence."""
    if verdict.label is None or not verdict.evidence:
        return []
    role = _ROLES[verdict.label]
    places = [(i, span) for i, item in enumerate(verdict.evidence) for span in sentence_spans(item.text, language)]
    texts = [verdict.evidence[i].text[span.start : span.end] for i, span in places]
    elements: list[tuple[Literal["claim", "subject", "predicate", "object"], str]] = (
        list(zip(("subject", "predicate", "object"), verdict.triplet, strict=True))
        if verdict.triplet is not None
        else [("claim", verdict.text)]
    )
    located: list[LocatedEvidence] = []
    for element, query in elements:
        ranked = await asyncio.to_thread(retriever.rank, query, texts, 1)
        for index, score in ranked:
            if score > 0:
                item, span = places[index]
                located.append(
                    LocatedEvidence(
                        evidence=item,
                        start=span.start,
                        end=span.end,
                        text=texts[index],
                        element=element,
                        score=round(score, 6),
                        role=role,
                    )
                )
    return located
