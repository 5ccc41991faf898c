"""The one sentence splitter (debate.sentences) on text off the easy path: Hebrew, Arabic, Chinese, German,
lower-case starts, abbreviations, decimals, [S0] citations, hard-wrapped paragraphs and blank lines; and what it
feeds: RAG claims and a document's evidence sentences."""

from __future__ import annotations

import json
import textwrap

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.claims import rag_claims
from debate.config import RetrievalConfig
from debate.sentences import guess_language, sentence_spans, split_sentences
from debate.testing import ScriptedChatClient
from tests.support.helpers import FIXTURES, op

# Each case: a name, the language to set (None: guessed from the script), the text and its sentences. Shared with
# benchmarks/bench_splitters.py, which runs other splitters on them.
CASES = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [(c["language"], c["text"], c["sentences"]) for c in CASES if not c.get("known_limit")],
    ids=[c["name"] for c in CASES if not c.get("known_limit")],
)
def test_the_splitter_on_text_off_the_easy_path(language: str | None, text: str, expected: list[str]) -> None:
    assert split_sentences(text, language) == expected
    # Spans point into the text, without the white space around each sentence.
    assert [" ".join(text[s.start : s.end].split()) for s in sentence_spans(text, language)] == expected


@pytest.mark.xfail(strict=True, reason="sentencex cuts after a German ordinal before an abbreviated month (3. Okt.)")
def test_a_german_ordinal_before_an_abbreviated_month_is_a_known_limit() -> None:
    [case] = [c for c in CASES if c.get("known_limit")]
    assert split_sentences(case["text"], case["language"]) == case["sentences"]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("שלום עולם", "he"),
        ("مرحبا بالعالم", "ar"),
        ("你好世界", "zh"),
        ("Привет мир", "ru"),
        ("Hello", "en"),
        ("12345 !!!", "en"),
        ("", "en"),
        ("ひらがなとカタカナ", "ja"),
    ],
)
def test_the_language_is_guessed_from_the_script(text: str, language: str) -> None:
    assert guess_language(text) == language


def test_lone_surrogates_and_nul_do_not_break_the_splitter() -> None:
    text = "First \ud800 sentence here. Second\x00 one."
    assert [text[s.start : s.end] for s in sentence_spans(text)] == ["First \ud800 sentence here.", "Second\x00 one."]


def test_rag_claims_in_hebrew_lower_case_and_chinese_are_each_a_claim() -> None:
    """Seed 002 "Extract Claims & Citations": every sentence is a claim with its own citations, 15 characters at
    the least; a sentence no longer inherits the citations of the one before it."""
    hebrew = rag_claims('השמאי קבע פיצוי של 50,000 ש"ח [S0]. זה נפוץ במקרים דומים.')
    assert [(c.text, c.citations) for c in hebrew.claims] == [
        ('השמאי קבע פיצוי של 50,000 ש"ח', ["S0"]),
        ("זה נפוץ במקרים דומים", []),
    ]
    lower = rag_claims("Paris is the capital of France [S0]. it has about two million people.")
    assert [c.citations for c in lower.claims] == [["S0"], []]
    chinese = rag_claims("巴黎是法国的首都，也是最大的城市[S0]。塞纳河流经巴黎市中心的许多地区。")
    assert [c.citations for c in chinese.claims] == [["S0"], []]
    short = rag_claims("Yes [S0]. Paris is the capital of France [S0]. Short one.")
    assert ([c.text for c in short.claims], short.short) == (["Paris is the capital of France"], 2)
    assert short.notes(15, None) == ["2 sentence(s) shorter than 15 characters are not claims"]


def test_a_claim_cap_is_a_setting_and_says_when_it_cuts() -> None:
    answer = " ".join(f"Sentence number {i} is a claim of its own [S0]." for i in range(12))
    assert len(rag_claims(answer).claims) == 12  # no cap by default
    capped = rag_claims(answer, max_claims=10)
    assert (len(capped.claims), capped.capped) == (10, 2)
    assert capped.notes(15, 10) == ["2 claim(s) beyond max_claims=10 were dropped"]


ARTICLE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after the "
    "engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. Locally nicknamed "
    "La dame de fer, it was constructed as the centrepiece of the 1889 World's Fair.\n\n"
    "The tower is 330 metres tall, about the same height as an 81-storey building. It was the tallest man-made "
    "structure in the world until the Chrysler Building in New York City was finished in 1930."
)


async def test_a_source_hard_wrapped_at_60_columns_gives_only_whole_sentences_as_evidence() -> None:
    wrapped = "\n\n".join(textwrap.fill(paragraph, 60) for paragraph in ARTICLE.split("\n\n"))
    assert max(len(line) for line in wrapped.splitlines()) <= 60
    whole = set(split_sentences(ARTICLE))
    assert len(whole) == 5
    client = ScriptedChatClient({"debate": [op(True)] * 2})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), retrieval=RetrievalConfig(retriever="bm25", top_k=3)
    )
    claims = ["The tower is named after Gustave Eiffel.", "The tower is 330 metres tall."]
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(wrapped, reference=wrapped, task="summarization", claims=claims)
    texts = [e.text for claim in report.claims for e in claim.evidence]
    assert len(texts) == 6 and set(texts) <= whole
