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

import functools
import re
import unicodedata

from sentencex import get_sentence_boundaries

from debate.types import Span

__all__ = ["WIDE_WEIGHT", "claim_length", "guess_language", "sentence_spans", "split_sentences"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_INNER_SPACE = re.compile(r"\s+")
# A line break between two characters of a script written without spaces joins them with nothing.
_WIDE_BREAK = re.compile(
    r"(?<=[\u3000-\u9fff\uf900-\ufaff\uff00-\uffef])\s*\n\s*(?=[\u3000-\u9fff\uf900-\ufaff\uff00-\uffef])"
)

# Abbreviations sentencex's lists miss, per language: (titles, which precede a name and so never end a sentence;
# others, which end one only before a capital letter). Spaced forms ("z. B.") match with or without the space.
_ABBREVIATIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en": (("Dr.", "Prof.", "Mr.", "Mrs.", "Ms.", "St.", "Gen.", "Sen.", "Rep."), ("e.g.", "i.e.", "approx.", "vs.")),
    # German capitalises every noun, so a capital after these says nothing: they never end a sentence here.
    "de": (
        (
            "Dr.",
            "Prof.",
            "Hr.",
            "Fr.",
            "St.",
            "z.B.",
            "d.h.",
            "u.a.",
            "bzw.",
            "ca.",
            "Nr.",
            "Art.",
            "Abs.",
            "vgl.",
            "ggf.",
            "evtl.",
            "S.",
            "z.T.",
            "o.ä.",
            "inkl.",
            "zzgl.",
            "Jan.",
            "Feb.",
            "Aug.",
            "Sept.",
            "Okt.",
            "Nov.",
            "Dez.",
        ),
        (),
    ),
    "fr": (
        ("M.", "MM.", "Mme", "Mlle", "Dr.", "Pr.", "St."),
        ("p.ex.", "c.-à-d.", "env.", "av.", "apr.", "cf.", "no.", "art.", "vol.", "chap."),
    ),
    "es": (
        ("Sr.", "Sra.", "Srta.", "Dr.", "Dra.", "D.", "Dña.", "Ud.", "Uds."),
        ("p.ej.", "pág.", "aprox.", "núm.", "art.", "etc."),
    ),
    "it": (("Sig.", "Sig.ra", "Dott.", "Prof.", "Ing."), ("ad es.", "ecc.", "pag.", "art.")),
    "pt": (("Sr.", "Sra.", "Dr.", "Dra.", "Prof."), ("p.ex.", "pág.", "art.", "aprox.")),
    "ru": (
        ("г-н", "г-жа", "проф.", "акад.", "им."),
        (
            "т.е.",
            "т.к.",
            "т.н.",
            "т.ч.",
            "г.",
            "гг.",
            "ул.",
            "д.",
            "см.",
            "стр.",
            "рис.",
            "табл.",
            "млн.",
            "млрд.",
            "тыс.",
            "руб.",
            "в.",
        ),
    ),
    "hi": (("डॉ.", "श्री.", "प्रो.", "सं."), ()),
}
# Latin-script text is read as English when no language is given: the abbreviations of every Latin-script
# language above apply to it, so a German "z. B." stays whole without --language de.
_LATIN = ("en", "de", "fr", "es", "it", "pt")
# "am 12. Mai": a German ordinal day before a month (sentencex's English rules, used for unnamed Latin text, cut it).
_ORDINAL = re.compile(r"(?:^|\s)\d{1,2}\.$")
_MONTH = re.compile(
    r"(?:Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember|Jan\.|Feb\.|"
    r"Aug\.|Sept?\.|Okt\.|Nov\.|Dez\.)(?:\W|$)"
)
_LIST_MARKER = re.compile(r"^(?:\(?\d{1,3}[.)]|\(?[A-Za-z][.)]|[-*\u2022\u2023\u25e6])$")
_CLOSERS = "\"'\u201d\u2019\u00bb\u300d\u300f\uff09)\u3011"
# What continues a sentence straight after a closing quote: a Japanese particle (hiragana: 「...。」と言った), a
# Korean one (Hangul: "...."라고), or a lower-case word; a Han character starts a new Chinese sentence (“好。”然后).
_ATTACHED = re.compile(r"[\u3040-\u309f\uac00-\ud7af]|[^\W\d_]")
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n")
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
    if text.isascii():
        return "en"  # only Latin letters, if any: the common case, answered without a look at each character
    counts: dict[str, int] = {}
    seen = 0
    for char in text:
        if not char.isalpha():
            continue
        language = _script_language(char)
        if language is not None:
            counts[language] = counts.get(language, 0) + 1
        seen += 1
        if seen >= _SAMPLE:
            break
    return max(counts, key=lambda code: counts[code]) if counts else "en"


@functools.lru_cache(maxsize=8192)
def _script_language(char: str) -> str | None:
    # Cached: the Unicode-name lookup and prefix scan were most of a short answer's verification in the guard.
    name = unicodedata.name(char, "")
    return next((code for prefix, code in _SCRIPTS if name.startswith(prefix)), None)


WIDE_WEIGHT = 3
"""What one character of an East Asian wide script (Han, kana, Hangul, their full-width forms) counts for in
`claim_length`: such a character carries about what three Latin letters do (a Chinese word is 1-2 characters, an
English one 5-6 with its space), so a 7-character Chinese sentence is as long as a 21-character English one."""


def claim_length(text: str) -> int:
    """The length a minimum claim length is measured in, the same in every script: code points, as the logprob
    grounding source counts them (so Latin, Cyrillic, Greek, Arabic, Hebrew and Indic text measure exactly as
    there), except that a character of an East Asian wide script counts `WIDE_WEIGHT` (3)."""
    if text.isascii():
        return len(text)
    wide = sum(1 for char in text if char > "\u10ff" and unicodedata.east_asian_width(char) in "WF" and char.isalnum())
    return len(text) + (WIDE_WEIGHT - 1) * wide


def sentence_spans(text: str, language: str | None = None) -> list[Span]:
    """The spans of `text`'s sentences, in order, each without the white space around it; paragraph breaks and
    white-space-only pieces are not sentences. `language`: an ISO 639 code, else guessed from the script."""
    return list(_sentence_spans(text, language))


# A text is often cut twice in a row (a RAG answer's claims, then their spans): the second cut is a look-up. A few
# entries suffice for that, and bound what the cache holds on to.
@functools.lru_cache(maxsize=8)
def _sentence_spans(text: str, language: str | None) -> tuple[Span, ...]:
    # sentencex encodes to UTF-8: a lone surrogate (possible in JSON input) becomes U+FFFD, one code point for one,
    # so the offsets still point into `text`.
    safe = _SURROGATE.sub("\ufffd", text)
    pieces: list[tuple[int, int]] = []
    chosen = language or guess_language(safe)
    for piece in get_sentence_boundaries(chosen, safe):
        start, end = int(piece["start_index"]), int(piece["end_index"])
        chunk = text[start:end]
        stripped = chunk.strip()
        if not stripped:
            continue
        start += len(chunk) - len(chunk.lstrip())
        pieces.append((start, start + len(stripped)))
    rules = _abbreviations(chosen if language or chosen != "en" else "latin")
    return tuple(Span(start=start, end=end) for start, end in _rejoin(text, pieces, rules))


_Rules = tuple[frozenset[str], frozenset[str]] | None
_TAIL = 24
_OPENERS = "([\"'\u201c\u201e\u00ab"
"""Characters at the end of a piece looked at for an abbreviation (longer than the longest form, spaced)."""


def _form(text: str) -> str:
    """An abbreviation as compared: lower case, without its spaces ("z. B." and "z.B." are one form)."""
    return "".join(text.split()).lower()


@functools.lru_cache(maxsize=64)
def _abbreviations(language: str) -> _Rules:
    """(titles, others) of `language` ("latin": of every Latin-script language listed), as `_form`s."""
    languages = _LATIN if language == "latin" else (language.split("-")[0],)
    found = [_ABBREVIATIONS[code] for code in languages if code in _ABBREVIATIONS]
    if not found:
        return None
    titles = frozenset(_form(t) for group, _ in found for t in group)
    return titles, frozenset(_form(o) for _, group in found for o in group)


@functools.lru_cache(maxsize=128)
def _last_words(forms: frozenset[str]) -> frozenset[str]:
    """What the last word of a piece ending with one of `forms` can be: a form, or its end after one of its dots
    ("b." and "z.b." for "z.B.", spaced or not)."""
    return frozenset(form[i + 1 :] for form in forms for i in range(-1, len(form) - 1) if i < 0 or form[i] == ".")


def _ends_with(head: str, forms: frozenset[str]) -> bool:
    """Whether `head` ends with one of `forms`, spaced or not (its last three words are tried, as one form)."""
    words = head.split()[-3:]
    if not words or _form(words[-1]).lstrip(_OPENERS) not in _last_words(forms):
        return False  # the common case, settled by one look-up
    return any(_form("".join(words[-k:])).lstrip(_OPENERS) in forms for k in range(1, len(words) + 1))


def _joins(text: str, before: tuple[int, int], after: tuple[int, int], abbreviations: _Rules) -> bool:
    """Whether sentencex's cut between two pieces is none: a list marker alone, a quote closed mid-sentence (a CJK
    particle follows it without a space), or an abbreviation sentencex does not know."""
    gap = text[before[1] : after[0]]
    if "\n" in gap and _PARAGRAPH.search(gap):
        return False
    # Only the end of the piece before matters (an abbreviation, a list marker): a long piece is not scanned whole.
    head, first = text[max(before[0], before[1] - _TAIL) : before[1]], text[after[0]]
    if before[1] - before[0] <= 4 and _LIST_MARKER.match(head):
        return True
    if not gap and head[-1] in _CLOSERS and _ATTACHED.match(first) and not first.isupper() and not _is_han(first):
        return True
    if abbreviations is None:
        return False
    titles, others = abbreviations
    if _ends_with(head, titles) or (_ORDINAL.search(head) and _MONTH.match(text, after[0], after[0] + 12)):
        return True
    continues = first.islower() or first.isdigit() or (first.isalpha() and not first.isupper())
    return continues and _ends_with(head, others)


def _is_han(char: str) -> bool:
    return "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"


def _rejoin(text: str, pieces: list[tuple[int, int]], abbreviations: _Rules) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    for piece in pieces:
        if joined and _joins(text, joined[-1], piece, abbreviations):
            joined[-1] = (joined[-1][0], piece[1])
        else:
            joined.append(piece)
    return joined


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """The sentences of `text` (as `sentence_spans` cuts them), each with its inner line breaks and runs of white
    space folded into one space, so a hard-wrapped sentence reads as one line."""
    return [_INNER_SPACE.sub(" ", _WIDE_BREAK.sub("", text[s.start : s.end])) for s in sentence_spans(text, language)]
