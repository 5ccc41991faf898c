"""Both retrievers on a real HaluEval summarization document; the sentence splitter; the content-hash cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debate.evidence import BM25Retriever, DenseRetriever, RetrievalCache, document_evidence
from debate.sentences import split_sentences
from debate.types import Claim
from tests.support.helpers import FIXTURES

FIXTURE = FIXTURES / "halueval_summarization_icc.jsonl"
DOCUMENT = json.loads(FIXTURE.read_text())["document"]

# Claim -> the sentence of the article that states its fact.
CASES = [
    (
        "Israel and the United States opposed the Palestinians' bid to join the ICC.",
        "Israel and the United States, neither",
    ),
    ("More than 2,000 people died in last summer's Gaza war.", "The war between Israel and Hamas militants"),
    ("The ICC was founded in 2002.", "The International Criminal Court was set up in 2002"),
    ("Palestine became the 123rd member of the International Criminal Court.", "The Palestinian Authority officially"),
    ("Fatou Bensouda promised an independent and impartial analysis.", "Prosecutor Fatou Bensouda said"),
]


def test_split_sentences_keeps_abbreviations_and_quotes() -> None:
    text = 'Dr. Smith met Mr. Jones in the U.S. on Monday. "It went well." He left at 5 p.m. Then it rained!\nNew line'
    assert split_sentences(text) == [
        "Dr. Smith met Mr. Jones in the U.S. on Monday.",
        '"It went well."',
        "He left at 5 p.m.",
        "Then it rained!",
        "New line",
    ]
    sentences = split_sentences(DOCUMENT)
    assert len(sentences) == 26
    assert sentences[-1] == "CNN's Vasco Cotovio, Kareem Khadder and Faith Karimi contributed to this report."


@pytest.mark.parametrize("retriever", [BM25Retriever(), DenseRetriever()], ids=["bm25", "dense"])
@pytest.mark.parametrize(("claim", "fact_start"), CASES)
async def test_fact_sentence_is_in_top_10(
    retriever: BM25Retriever | DenseRetriever, claim: str, fact_start: str
) -> None:
    evidence = await document_evidence(
        Claim(id="c0", text=claim, kind="atomic"),
        DOCUMENT,
        retriever=retriever,
        k=10,
        source="doc",
        cache=RetrievalCache(),
    )
    assert len(evidence) == 10
    assert any(e.text.startswith(fact_start) for e in evidence), [e.text[:50] for e in evidence]
    indices = [int(e.source.split("-")[-1]) for e in evidence if e.source]
    assert indices == sorted(indices)  # document order, each with its sentence index
    best = max(evidence, key=lambda e: e.score or 0.0)
    assert best.kind == "document" and best.score is not None


async def test_dense_ranks_the_fact_sentence_first_for_a_paraphrase() -> None:
    ranked = DenseRetriever().rank("When was the International Criminal Court created?", split_sentences(DOCUMENT), 3)
    assert split_sentences(DOCUMENT)[ranked[0][0]].startswith("The International Criminal Court was set up in 2002")


async def test_cache_by_content_hash_in_memory_and_on_disk(tmp_path: Path) -> None:
    claim = Claim(id="c0", text="The ICC was founded in 2002.", kind="atomic")
    calls = []

    class Counting(BM25Retriever):
        def rank(self, query: str, sentences, k):  # type: ignore[no-untyped-def]
            calls.append(query)
            return super().rank(query, sentences, k)

    cache = RetrievalCache(directory=str(tmp_path))
    first = await document_evidence(claim, DOCUMENT, retriever=Counting(), k=5, source="doc", cache=cache)
    second = await document_evidence(claim, DOCUMENT, retriever=Counting(), k=5, source="doc", cache=cache)
    assert first == second and len(calls) == 1 and cache.hits == 1
    fresh = RetrievalCache(directory=str(tmp_path))  # a new process would see the disk copy
    third = await document_evidence(claim, DOCUMENT, retriever=Counting(), k=5, source="doc", cache=fresh)
    assert third == first and len(calls) == 1
    other = await document_evidence(claim, DOCUMENT + " Extra.", retriever=Counting(), k=5, source="doc", cache=fresh)
    assert len(calls) == 2 and other is not None
