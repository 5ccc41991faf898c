"""The one sentence splitter (debate.sentences) on text off the easy path: Hebrew, Arabic, Chinese, German,
lower-case starts, abbreviations, decimals, [S0] citations, hard-wrapped paragraphs and blank lines; and what it
feeds: RAG claims and a document's evidence sentences."""

from __future__ import annotations

import itertools
import json
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debate import DebateConfig, Verifier, VerifierConfig
from debate.claims import rag_claims
from debate.cli.render import verdict_caveats
from debate.config import RetrievalConfig
from debate.plugins import TaskInput
from debate.sentences import claim_length, guess_language, sentence_spans, split_sentences
from debate.testing import ScriptedChatClient
from tests.support.helpers import DATA, op
from tests.support.properties import examples

# The multilingual corpus (tests/data/sentences.json): per language, cases with the expected sentences. Shared
# with benchmarks/bench_splitters.py, which reports the exact-match rate per language (docs/how-it-works.md).
CORPUS: dict[str, list[dict[str, Any]]] = json.loads((DATA / "sentences.json").read_text(encoding="utf-8"))["languages"]
CASES = [(language, case) for language, cases in CORPUS.items() for case in cases]


def test_the_corpus_covers_the_languages_the_issue_names() -> None:
    assert {"ar", "he", "ru", "zh", "ja", "ko", "hi", "de", "fr", "en"} <= set(CORPUS)
    assert all(len(cases) >= 4 for cases in CORPUS.values())


@pytest.mark.parametrize("named", [True, False], ids=["language given", "language guessed"])
@pytest.mark.parametrize(("language", "case"), CASES, ids=[f"{lang}: {c['name']}" for lang, c in CASES])
def test_the_splitter_on_the_multilingual_corpus(language: str, case: dict[str, Any], named: bool) -> None:
    """Each language's abbreviations (spaced ones too), decimals, initials, quotes, lists, lower-case starts and
    hard-wrapped lines, with the language given and guessed from the script (Latin script: every Latin-script
    language's abbreviations apply)."""
    text, expected = case["text"], case["sentences"]
    given = language if named else None
    assert split_sentences(text, given) == expected
    # Spans point into the text, without the white space around each sentence.
    spans = [text[s.start : s.end] for s in sentence_spans(text, given)]
    assert ["".join(piece.split()) for piece in spans] == ["".join(e.split()) for e in expected]
    assert all(piece == piece.strip() for piece in spans)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400) | st.lists(
    st.sampled_from(
        [
            "Dr. ",
            "z. B. ",
            "т. е. ",
            "M. ",
            "3.5 ",
            "1. ",
            "「好。」",
            "と言った。",
            "。",
            "？",
            "! ",
            "\n",
            "\n\n",
            "word ",
            "Paris ",
            "巴黎",
            "서울은 ",
            'ש"ח ',
            "باريس ",
            "दिल्ली। ",
            "\u200f",
            "\u0301",
            "🙂",
            "[S0]",
            " ",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=examples(3, why="a pure function, well under a millisecond an example"), deadline=None)
@given(text=_TEXT, language=st.sampled_from([None, *CORPUS]))
def test_sentences_cover_every_non_space_character_once_in_order(text: str, language: str | None) -> None:
    spans = sentence_spans(text, language)
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
    assert all(s.start < s.end and not text[s.start].isspace() and not text[s.end - 1].isspace() for s in spans)
    inside = [False] * len(text)
    for span in spans:
        inside[span.start : span.end] = [True] * (span.end - span.start)
    assert all(inside[i] or char.isspace() for i, char in enumerate(text))
    # A second cut of the same text is a look-up: the same spans, in a list of the caller's own.
    again = sentence_spans(text, language)
    assert again == spans and again is not spans
    spans.clear()
    assert sentence_spans(text, language) == again


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
    assert short.notes(15, None) == [
        "2 sentence(s) shorter than 15 characters (a CJK character counts 3) are not claims"
    ]


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
        report = await verifier.verify(TaskInput(wrapped, reference=wrapped, claims=claims), task="summarization")
    texts = [e.text for claim in report.claims for e in claim.evidence]
    assert len(texts) == 6 and set(texts) <= whole


@pytest.mark.parametrize(
    ("answer", "claims"),
    [
        ("巴黎是法国的首都[S0]。柏林是德国的首都。", ["巴黎是法国的首都", "柏林是德国的首都"]),
        ("東京は日本の首都です[S0]。大阪は大きい。", ["東京は日本の首都です", "大阪は大きい"]),
        ("서울은 한국의 수도이다 [S0]. 부산은 크다.", ["서울은 한국의 수도이다", "부산은 크다"]),
    ],
)
def test_a_short_cjk_sentence_is_a_claim(answer: str, claims: list[str]) -> None:
    """Issue 43: a full Chinese, Japanese or Korean claim is 5-12 characters; the 15-character minimum (a Latin
    number) made such an answer no_claims, so a hallucinated sentence passed unchecked. A wide character counts 3."""
    found = rag_claims(answer)
    assert [c.text for c in found.claims] == claims and found.short == 0
    assert claim_length("是的") == 6 < 15 and claim_length("Paris is nice.") == len("Paris is nice.")


async def test_an_answer_with_nothing_checkable_is_never_reported_as_checked() -> None:
    client = ScriptedChatClient([])  # no model call may be made
    async with Verifier(client=client, config=VerifierConfig()) as verifier:
        report = await verifier.verify(TaskInput("Yes [S0]. OK.", reference={"S0": "Paris is in France."}), task="rag")
    assert report.verdict == "no_claims" and report.factual is None and report.claims == []
    assert "2 sentence(s) shorter than 15 characters" in (report.note or "")
    assert verdict_caveats(report)[0] == "nothing in the response was checked: it has no checkable claim"
