"""Metric functions against hand-computed values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from experiments.baselines import Baselines, fit_length_threshold
from experiments.metrics import Outcome, auroc, bootstrap_ci, classification, summarize

# labels: 3 factual, 3 hallucinated; one factual item is unverifiable (counted wrong -> FN).
OUTCOMES = [
    Outcome(True, True, 0.9),
    Outcome(True, False, 0.4),
    Outcome(True, None, 0.0),
    Outcome(False, False, 0.1),
    Outcome(False, False, 0.2),
    Outcome(False, True, 0.8),
]


def test_classification_counts_unverifiable_as_wrong() -> None:
    # factual positive: TP=1, FN=2 (one false, one unverifiable), FP=1, TN=2
    m = classification(OUTCOMES)
    assert m["accuracy"] == pytest.approx(3 / 6)
    assert m["precision"] == pytest.approx(1 / 2) and m["recall"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    # hallucination positive: TP=2, FP=2 (the false factual and the unverifiable), FN=1
    h = classification(OUTCOMES, positive=False)
    assert h["precision"] == pytest.approx(2 / 4) and h["recall"] == pytest.approx(2 / 3)
    assert h["accuracy"] == m["accuracy"]


def test_unverifiable_negative_counts_as_false_positive() -> None:
    m = classification([Outcome(False, None)])
    assert m == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_auroc_by_hand_with_ties() -> None:
    # positives 0.9, 0.4, 0.0 vs negatives 0.1, 0.2, 0.8: pairs won = 0.9 beats 3, 0.4 beats 2, 0.0 beats 0 -> 5/9
    assert auroc(OUTCOMES) == pytest.approx(5 / 9)
    tied = [Outcome(True, True, 0.5), Outcome(False, False, 0.5)]
    assert auroc(tied) == 0.5
    assert auroc([Outcome(True, True, 1.0)]) is None
    assert auroc([Outcome(True, None, None), Outcome(False, False, 0.0)]) == 1.0  # no score counts as 0.5


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    def acc(sample):  # type: ignore[no-untyped-def]
        return classification(sample)["accuracy"]

    first = bootstrap_ci(OUTCOMES, acc, resamples=1000, seed=1)
    assert first == bootstrap_ci(OUTCOMES, acc, resamples=1000, seed=1)
    assert first is not None and first[0] <= 0.5 <= first[1]
    narrow = bootstrap_ci(OUTCOMES * 20, acc, resamples=1000, seed=1)
    assert narrow is not None and narrow[1] - narrow[0] < first[1] - first[0]  # more items, tighter interval
    summary = summarize(OUTCOMES, seed=0, resamples=200)
    assert summary["n"] == 6 and summary["unverifiable"] == 1
    assert (
        summary["accuracy"] == 0.5 and "f1_hallucination_ci95" in summary and summary["auroc"] == pytest.approx(5 / 9)
    )


def test_length_threshold_and_baselines() -> None:
    pairs = [(10, True), (12, True), (30, True), (40, False), (50, False), (20, False)]
    # t=12: predicts 10,12 factual (right), 20,30,40,50 hallucinated (30 wrong) -> 5/6, the best and smallest.
    assert fit_length_threshold(pairs) == 12
    fitted = Baselines.fit(pairs)
    outcomes = fitted.length_only([(11, True), (60, False), (25, True)])
    assert [o.pred for o in outcomes] == [True, False, False]
    assert fitted.majority_factual is True and [o.pred for o in fitted.majority([(1, False)])] == [True]


def test_summary_intervals_equal_the_generic_bootstrap() -> None:
    """The vectorised summary uses the same resamples as bootstrap_ci: every interval matches the slow path."""
    import random

    rng = random.Random(3)
    outcomes = [
        Outcome(rng.random() < 0.5, rng.choice([True, False, None]), rng.choice([None, 0.0, 0.25, 0.5, 1.0]))
        for _ in range(60)
    ]
    summary = summarize(outcomes, seed=5, resamples=300)
    for view, positive in (("", True), ("_hallucination", False)):
        for name in ("precision", "recall", "f1") + (("accuracy",) if positive else ()):

            def metric(sample, name=name, positive=positive):  # type: ignore[no-untyped-def]
                return classification(sample, positive=positive)[name]

            expected = bootstrap_ci(outcomes, metric, resamples=300, seed=5)
            assert summary[f"{name}{view}_ci95"] == pytest.approx(expected), name + view
    assert summary["auroc_ci95"] == pytest.approx(bootstrap_ci(outcomes, auroc, resamples=300, seed=5))


def test_summary_equals_scipy_bootstrap_of_sklearn_metrics_on_a_fixture() -> None:
    """On a recorded run (the fixture), every interval is exactly what scipy.stats.bootstrap gives with
    scikit-learn's own metric functions as the statistic, resample by resample: the vectorised statistic changes
    the cost, not a value."""
    import json

    import numpy as np
    from scipy import stats
    from sklearn.metrics import f1_score, roc_auc_score

    from tests.support.helpers import ROOT

    run = ROOT / "results" / "embedded-paper" / "ablate-transitions" / "true-to-skeptic" / "results.jsonl"
    records = [json.loads(line) for line in run.read_text().splitlines() if line.strip()]
    outcomes = [Outcome(r["label_factual"], r["pred_factual"], r["score"]) for r in records] * 3  # 36 items
    label = np.array([o.label for o in outcomes])
    pred = np.array([o.pred if o.pred is not None else not o.label for o in outcomes])
    score = np.array([o.score if o.score is not None else 0.5 for o in outcomes])

    def sklearn_ci(metric: Callable[[Any], float]) -> tuple[float, ...]:
        result = stats.bootstrap(
            (np.arange(len(outcomes)),),
            metric,
            n_resamples=500,
            batch=128,
            vectorized=False,
            method="percentile",
            rng=np.random.default_rng(4),
        )
        values = result.bootstrap_distribution[~np.isnan(result.bootstrap_distribution)]
        return tuple(np.percentile(values, [2.5, 97.5]))

    def auc(i: Any) -> float:
        return roc_auc_score(label[i], score[i]) if 0 < label[i].sum() < len(i) else np.nan

    summary = summarize(outcomes, seed=4, resamples=500)
    assert summary["f1_ci95"] == pytest.approx(
        sklearn_ci(lambda i: f1_score(label[i], pred[i], zero_division=0)), abs=1e-12
    )
    assert summary["f1_hallucination_ci95"] == pytest.approx(
        sklearn_ci(lambda i: f1_score(label[i], pred[i], pos_label=False, zero_division=0)), abs=1e-12
    )
    assert summary["accuracy_ci95"] == pytest.approx(
        sklearn_ci(lambda i: float((label[i] == pred[i]).mean())), abs=1e-12
    )
    assert summary["auroc_ci95"] == pytest.approx(sklearn_ci(auc), abs=1e-12)
