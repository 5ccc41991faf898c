"""Baselines that need no model, printed next to every model result so dataset artifacts are not mistaken for
skill: `length-only` (longer than a threshold tuned on a disjoint split => hallucinated) and `majority-class`."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.data import HALUEVAL_FILES, PAIRED_FIELDS, DataError
from experiments.metrics import Outcome

__all__ = ["Baselines", "fit_length_threshold", "tuning_pairs"]


def tuning_pairs(
    benchmark: str,
    task: str,
    *,
    data_dir: Path,
    exclude_lines: set[int],
    seed: int,
    m: int = 1000,
    level: str = "response",
) -> list[tuple[int, bool]]:
    """(length in characters, label_factual) from up to `m` records whose lines are not in the evaluation sample.
    For HaluEval qa/dialogue/summarization both outputs of a record are used; for FactPrompts at claim level, every
    annotated claim of a record."""
    if benchmark == "halueval":
        path = data_dir / "halueval" / HALUEVAL_FILES[task]  # type: ignore[index]
    else:
        path = data_dir / "factool" / "knowledge_qa.jsonl"
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    # utf-8-sig: a file saved with a byte-order mark reads as the same records (its first line was a traceback)
    with path.open(encoding="utf-8-sig") as fh:
        lines = [n for n, text in enumerate(fh, start=1) if text.strip() and n not in exclude_lines]
    chosen = set(random.Random(seed + 2).sample(lines, min(m, len(lines))))
    pairs: list[tuple[int, bool]] = []
    with path.open(encoding="utf-8-sig") as fh:
        for number, text in enumerate(fh, start=1):
            if number not in chosen:
                continue
            try:
                pairs.extend(_pairs(json.loads(text), benchmark, task, level))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(f"{path}: line {number}: not a {benchmark} {task} record ({exc!r})") from exc
    return pairs


def _pairs(record: dict[str, Any], benchmark: str, task: str, level: str) -> list[tuple[int, bool]]:
    if benchmark == "halueval" and task in PAIRED_FIELDS:
        right, wrong, _, _ = PAIRED_FIELDS[task]
        return [(len(str(record[right]).strip()), True), (len(str(record[wrong]).strip()), False)]
    if benchmark == "halueval":
        return [(len(str(record["chatgpt_response"]).strip()), record["hallucination"] == "no")]
    if level == "claim":
        return [(len(str(c["claim"]).strip()), bool(c["label"])) for c in record["claims"]]
    return [(len(str(record["response"]).strip()), bool(record["label"]))]


def fit_length_threshold(pairs: Sequence[tuple[int, bool]]) -> int:
    """The threshold t maximising accuracy of `length > t => hallucinated` (the smallest such t)."""
    if not pairs:
        raise ValueError("no tuning data")
    ordered = sorted(pairs)
    # Start with t below every length: everything is predicted hallucinated.
    correct = sum(1 for _, factual in ordered if not factual)
    best_correct, best_t = correct, ordered[0][0] - 1
    i = 0
    while i < len(ordered):
        length = ordered[i][0]
        while i < len(ordered) and ordered[i][0] == length:
            correct += 1 if ordered[i][1] else -1  # this item now predicted factual
            i += 1
        if correct > best_correct:
            best_correct, best_t = correct, length
    return best_t


@dataclass(frozen=True)
class Baselines:
    """Fitted on the tuning split, applied to the evaluation items."""

    threshold: int
    majority_factual: bool
    tuning_size: int

    @classmethod
    def fit(cls, pairs: Sequence[tuple[int, bool]]) -> Baselines:
        factual = sum(1 for _, f in pairs if f)
        return cls(fit_length_threshold(pairs), factual >= len(pairs) - factual, len(pairs))

    def length_only(self, items: Iterable[tuple[int, bool]]) -> list[Outcome]:
        return [Outcome(label=label, pred=length <= self.threshold, score=-float(length)) for length, label in items]

    def majority(self, items: Iterable[tuple[int, bool]]) -> list[Outcome]:
        return [Outcome(label=label, pred=self.majority_factual, score=0.5) for _, label in items]
