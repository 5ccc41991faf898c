"""The one sentence splitter of the engine: RAG claims, a document's evidence sentences, claim spans and the local
search collection all cut text here.

The cutting is sentencex's (Wikimedia's rule-based segmenter, about 300 languages): a sentence may start with a
lower-case letter, a Hebrew, Arabic or Chinese character; abbreviations, decimals and `[S0]` citations stay inside
their sentence; a single line break inside a paragraph is not a boundary (a hard-wrapped file keeps its sentences
whole), a blank line is. Chosen over ICU's sentence breaks, which cut after "Dr.", at every line break of a
hard-wrapped paragraph and not before a lower-case start (benchmarks/bench_splitters.py compares them).

sentencex takes a language for its abbreviation lists; unless one is given it is guessed from the text's dominant
script (`guess_language`), which names a script's usual language, not the text's: Latin script is read as English.
The RAG citation rules' citation rules keep their own split at every run of `.!?` (debate.prefilter._citations): that
is the seed's code, and their counts follow it.
"""

from __future__ import annotations

import re
import unicodedata

from sentencex import get_sentence_boundaries

from debate.types import Span

__all__ = ["guess_language", "sentence_spans", "split_sentences"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_INNER_SPACE = re.compile(r"\s+")
# The usual language of each script, by the prefix of its Unicode character names.
_SCRIPTS = (
    ("HEBREW", "he"),
    ("ARABIC", "ar"),
    ("CJK", "zh"),
    ("HIRAGANA", "ja"),
    ("KATAKANA", "ja"),
    ("HANGUL", "ko"),
    ("CYRILLIC", "ru"),
    ("GREEK", "el"),
    ("DEVANAGARI", "hi"),
    ("THAI", "th"),
    ("ARMENIAN", "hy"),
    ("GEORGIAN", "ka"),
    ("BENGALI", "bn"),
    ("TAMIL", "ta"),
    ("ETHIOPIC", "am"),
    ("LATIN", "en"),
)
_SAMPLE = 2000


def guess_language(text: str) -> str:
    """The usual language of the dominant script among the first 2,000 letters of `text` ("en" when there are
    none, or the script is not listed): he for Hebrew, ar for Arabic, zh for Han, ja for kana, ru for Cyrillic..."""
    counts: dict[str, int] = {}
    seen = 0
    for char in text:
        if not char.isalpha():
            continue
        name = unicodedata.name(char, "")
        language = next((code for prefix, code in _SCRIPTS if name.startswith(prefix)), None)
        if language is not None:
            counts[language] = counts.get(language, 0) + 1
        seen += 1
        if seen >= _SAMPLE:
            break
    return max(counts, key=lambda code: counts[code]) if counts else "en"


def sentence_spans(text: str, language: str | None = None) -> list[Span]:
    """The spans of `text`'s sentences, in order, each without the white space around it; paragraph breaks and
    white-space-only pieces are not sentences. `language`: an ISO 639 code, else guessed from the script."""
    # sentencex encodes to UTF-8: a lone surrogate (possible in JSON input) becomes U+FFFD, one code point for one,
    # so the offsets still point into `text`.
    safe = _SURROGATE.sub("\ufffd", text)
    spans: list[Span] = []
    for piece in get_sentence_boundaries(language or guess_language(safe), safe):
        start, end = int(piece["start_index"]), int(piece["end_index"])
        chunk = text[start:end]
        stripped = chunk.strip()
        if not stripped:
            continue
        start += len(chunk) - len(chunk.lstrip())
        spans.append(Span(start=start, end=start + len(stripped)))
    return spans


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """The sentences of `text` (as `sentence_spans` cuts them), each with its inner line breaks and runs of white
    space folded into one space, so a hard-wrapped sentence reads as one line."""
    return [_INNER_SPACE.sub(" ", text[s.start : s.end]) for s in sentence_spans(text, language)]
