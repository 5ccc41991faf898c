"""Claims grounded in the response: each claim gets the character span(s) of the response it comes from, and an
extracted claim that nothing in the response supports is dropped before anyone judges it (a small model may copy
the extraction prompt's example instead of decomposing the text).

Alignment is lexical and fuzzy: a claim found verbatim gets its exact span; otherwise its content words (lower-cased,
stopwords removed) are matched against the response's sentences, and the sentences that cover them best are its
spans. A claim is supported when at least `MIN_SUPPORT` of its content words occur in the response.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from debate.sentences import sentence_spans
from debate.types import Claim, Span

__all__ = ["MIN_SUPPORT", "Grounded", "ground_claims"]

MIN_SUPPORT = 0.34
"""Share of a claim's content words that must occur in the response (about one in three: claims paraphrase)."""

_WORD = re.compile(r"[a-z0-9]+(?:['’.\-][a-z0-9]+)*")
_STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that these "
    "those he she they them his her their we you i not no do does did has have had will would can could should may "
    "might than then there here which who whom whose what when where why how also into about over after before".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())}


def _align(claim: str, response: str, sentences: Sequence[Span]) -> list[Span] | None:
    exact = response.find(claim.strip().rstrip("."))
    if exact >= 0 and claim.strip():
        return [Span(start=exact, end=exact + len(claim.strip().rstrip(".")))]
    wanted = _words(claim)
    if not wanted or len(wanted & _words(response)) / len(wanted) < MIN_SUPPORT:
        return None
    chosen: list[Span] = []
    covered: set[str] = set()
    candidates = [(span, _words(response[span.start : span.end])) for span in sentences]
    while len(chosen) < 3:
        best = max(candidates, key=lambda c: len((c[1] & wanted) - covered), default=None)
        if best is None or not (best[1] & wanted) - covered:
            break
        chosen.append(best[0])
        covered |= best[1] & wanted
        candidates.remove(best)
    return sorted(chosen, key=lambda s: s.start) or None


@dataclass(frozen=True)
class Grounded:
    claims: list[Claim]
    dropped: list[str]


def ground_claims(claims: Sequence[Claim], response: str, *, may_drop: bool) -> Grounded:
    """Spans for every claim; with `may_drop` (extracted claims), claims without support are dropped and listed.
    Claims that already carry spans (qa pairs, rag sentences) are kept as they are."""
    sentences = sentence_spans(response)
    kept: list[Claim] = []
    dropped: list[str] = []
    for claim in claims:
        if claim.spans:
            kept.append(claim)
            continue
        spans = _align(claim.text, response, sentences)
        if spans is None and may_drop:
            dropped.append(claim.text)
            continue
        kept.append(claim.model_copy(update={"spans": spans or []}))
    # Ids stay dense (c0, c1, ...) after drops, so reports and reviews can rely on them.
    renumbered = [c.model_copy(update={"id": f"c{i}"}) for i, c in enumerate(kept)]
    return Grounded(renumbered, dropped)
