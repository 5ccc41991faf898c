"""How the sentence splitters a user could pick do on text off the easy path, and how fast: the one the engine
uses (sentencex), ICU's sentence breaks (icu4py, when installed) and a plain regex with the rule of the engine's
earlier splitter (a cut after . ! ? before a capital or digit, and at every line break; its abbreviation list left
out). The cases are tests/fixtures/sentences.json (English abbreviations and decimals, lower-case starts,
citations, Hebrew, Arabic, Chinese, German, hard-wrapped paragraphs); a case passes when the sentences, with inner
white space folded, are exactly the expected ones.

    python benchmarks/bench_splitters.py            # prints cases passed per splitter and microseconds per KB
    pip install icu4py && python benchmarks/bench_splitters.py   # with ICU beside it
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from debate.sentences import guess_language, split_sentences

CASES = json.loads((Path(__file__).parents[1] / "tests" / "fixtures" / "sentences.json").read_text(encoding="utf-8"))
Splitter = Callable[[str, str], list[str]]


def _fold(pieces: list[str]) -> list[str]:
    return [" ".join(p.split()) for p in pieces if p.strip()]


def _regex(text: str, language: str) -> list[str]:
    return _fold(re.split(r"(?<=[.!?])\s+(?=[\"'“‘(\[]?[A-Z0-9])|\n", text))


def _icu() -> Splitter | None:
    try:
        from icu4py.breakers import SentenceBreaker  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lambda text, language: _fold(list(SentenceBreaker(text, language)))


def main() -> None:
    splitters: dict[str, Splitter | None] = {
        "sentencex (debate.sentences)": lambda text, language: split_sentences(text, language),
        "ICU (icu4py)": _icu(),
        "regex: after .!? before a capital or digit, and at every line break": _regex,
    }
    corpus = " ".join(c["text"] for c in CASES) * 200
    for name, split in splitters.items():
        if split is None:
            print(f"{name}: not installed")
            continue
        passed = [
            c["name"] for c in CASES if split(c["text"], c["language"] or guess_language(c["text"])) == c["sentences"]
        ]
        started = time.perf_counter()
        split(corpus, "en")
        per_kb = (time.perf_counter() - started) / (len(corpus.encode()) / 1024) * 1e6
        print(f"{name}: {len(passed)} of {len(CASES)} cases, {per_kb:.0f} µs per KB")
        for case in CASES:
            if case["name"] not in passed:
                print(f"    fails: {case['name']}")


if __name__ == "__main__":
    main()
