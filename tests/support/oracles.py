"""Independent computations of the numbers a user reads, written from their definitions, for tests to compare
the product's figures with (tests/desk/test_stats_oracle.py, tests/desk/test_desk_api.py)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any, Literal, get_args

import pytest

from markov_debate.desk.models import EngineLabel

LABELS: tuple[str, ...] = get_args(EngineLabel)
Review = tuple[dt.datetime, str, str, int, str]
"""(when, the engine's label, the reviewer's label, audit id, claim id), as the store keeps a review."""


def kappa_by_hand(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa from the confusion table: (observed - chance) / (1 - chance), chance = sum over labels of
    the two raters' shares; undefined (None) when chance is 1 (both gave one and the same label throughout)."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] / n * second[label] / n for label in LABELS)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def period(at: dt.datetime, bucket: str) -> str:
    return at.date().isoformat() if bucket == "day" else at.strftime("%G-W%V")


def check_stats(reviews: list[Review], bucket: Literal["day", "week"], got: dict[str, Any]) -> None:
    """`got` (a Stats as JSON) is what the definitions give for `reviews`."""
    pairs = [(engine, human) for _, engine, human, _, _ in reviews]
    assert got["reviews"] == len(reviews)
    assert got["reviewed_claims"] == len({(audit, claim) for *_, audit, claim in reviews})
    if not pairs:
        assert got["agreement"] is None and got["kappa"] is None and got["over_time"] == []
        return
    assert got["agreement"] == pytest.approx(sum(a == b for a, b in pairs) / len(pairs))
    assert got["kappa"] == pytest.approx(kappa_by_hand(pairs))
    grouped: dict[str, list[tuple[str, str]]] = {}
    for at, engine, human, _, _ in reviews:
        grouped.setdefault(period(at, bucket), []).append((engine, human))
    expected = [
        (key, len(v), pytest.approx(sum(a == b for a, b in v) / len(v)), pytest.approx(kappa_by_hand(v)))
        for key, v in sorted(grouped.items())
    ]
    assert [(p["period"], p["reviews"], p["agreement"], p["kappa"]) for p in got["over_time"]] == expected
