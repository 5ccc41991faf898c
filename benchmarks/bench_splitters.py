"""How the sentence splitters a user could pick do on the multilingual corpus, per language, and how fast: the one
the engine uses (debate.sentences: sentencex and its rejoining rules), sentencex alone, ICU's sentence breaks
(icu4py, when installed) and a plain regex (a cut after . ! ? before a capital or digit, and at every line break).
The corpus is tests/data/sentences.json (11 languages: abbreviations with spaced forms, decimals, initials, quotes,
lists, lower-case starts, hard-wrapped lines); a case passes when the sentences, with inner white space folded, are
exactly the expected ones. Each splitter is given the case's language, then asked to guess it from the script.

    python benchmarks/bench_splitters.py            # exact-match rate per language and splitter, microseconds per KB
    pip install icu4py && python benchmarks/bench_splitters.py   # with ICU beside it
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentencex import segment

from debate.sentences import guess_language, split_sentences

CORPUS: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(__file__).parents[1] / "tests" / "data" / "sentences.json").read_text(encoding="utf-8")
)["languages"]
Splitter = Callable[[str, str | None], list[str]]


def _fold(pieces: list[str]) -> list[str]:
    return [" ".join(p.split()) for p in pieces if p.strip()]


def _regex(text: str, language: str | None) -> list[str]:
    return _fold(re.split(r"(?<=[.!?])\s+(?=[\"'“‘(\[]?[A-Z0-9])|\n", text))


def _sentencex(text: str, language: str | None) -> list[str]:
    return _fold(list(segment(language or guess_language(text), text)))


def _icu() -> Splitter | None:
    try:
        from icu4py.breakers import SentenceBreaker  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lambda text, language: _fold(list(SentenceBreaker(text, language or guess_language(text))))


def _matches(got: list[str], expected: list[str]) -> bool:
    # Compared without white space: a CJK hard wrap folds to nothing in the engine, to a space elsewhere.
    return ["".join(g.split()) for g in got] == ["".join(e.split()) for e in expected]


def main() -> None:
    splitters: dict[str, Splitter | None] = {
        "debate.sentences": split_sentences,
        "sentencex alone": _sentencex,
        "ICU (icu4py)": _icu(),
        "regex": _regex,
    }
    shown = {name: split for name, split in splitters.items() if split is not None}
    for name, split in splitters.items():
        if split is None:
            print(f"{name}: not installed")
    print("exact-match rate per language (language given / guessed from the script), cases in brackets:")
    print(f"{'language':<10}" + "".join(f"{name:>22}" for name in shown))
    totals = {name: [0, 0] for name in shown}
    for language, cases in CORPUS.items():
        cells = []
        for name, split in shown.items():
            given = sum(_matches(split(c["text"], language), c["sentences"]) for c in cases)
            guessed = sum(_matches(split(c["text"], None), c["sentences"]) for c in cases)
            totals[name][0] += given
            totals[name][1] += guessed
            cells.append(f"{given / len(cases):.2f} / {guessed / len(cases):.2f}")
        print(f"{language + f' ({len(cases)})':<10}" + "".join(f"{cell:>22}" for cell in cells))
    count = sum(len(cases) for cases in CORPUS.values())
    print(
        f"{f'all ({count})':<10}"
        + "".join(f"{t[0] / count:.2f} / {t[1] / count:.2f}".rjust(22) for t in totals.values())
    )
    corpus = " ".join(c["text"] for cases in CORPUS.values() for c in cases) * 50
    for name, split in shown.items():
        started = time.perf_counter()
        split(corpus, None)
        per_kb = (time.perf_counter() - started) / (len(corpus.encode()) / 1024) * 1e6
        print(f"{name}: {per_kb:.0f} µs per KB")


if __name__ == "__main__":
    main()
