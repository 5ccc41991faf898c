"""Metrics with unverifiable items counted wrong, AUROC from scores, and seeded bootstrap confidence intervals.

An item with no prediction (unverifiable, no claims, or failed) is counted wrong: in the confusion matrix it lands
on the side opposite its label (a false negative for a positive item, a false positive for a negative one).

Point metrics are scikit-learn's; the bootstrap is scipy's (`scipy.stats.bootstrap`, percentile intervals, a
seeded numpy Generator). What is ours is the statistic scipy resamples: every metric of a resample computed at
once from how often it draws each item, so 1,000 resamples of 10,000 items cost a few matrix products rather than
8,000 scikit-learn calls. A test checks it against scikit-learn's functions resample by resample.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["METRICS", "Outcome", "auroc", "bootstrap_ci", "classification", "summarize"]


@dataclass(frozen=True)
class Outcome:
    """One scored item."""

    label: bool
    """True when the item is factual."""
    pred: bool | None
    """The prediction; None when there is none."""
    score: float | None = None
    """Higher = more factual."""


def _arrays(outcomes: Sequence[Outcome]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, predictions with a missing one on the side opposite its label, and scores (missing: 0.5)."""
    label = np.array([o.label for o in outcomes], dtype=bool)
    pred = np.array([o.pred if o.pred is not None else not o.label for o in outcomes], dtype=bool)
    score = np.array([o.score if o.score is not None else 0.5 for o in outcomes], dtype=float)
    return label, pred, score


def classification(outcomes: Sequence[Outcome], *, positive: bool = True) -> dict[str, float]:
    """Accuracy, precision, recall and F1 for the class `positive` (True = factual, False = hallucinated)."""
    if not outcomes:
        return {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    # scikit-learn and scipy come with the experiments extra: imported where used, so `--help` needs neither.
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    label, pred, _ = _arrays(outcomes)
    precision, recall, f1, _ = precision_recall_fscore_support(
        label, pred, labels=[positive], pos_label=positive, average="binary", zero_division=0.0
    )
    return {
        "accuracy": float(accuracy_score(label, pred)),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
    }


def auroc(outcomes: Sequence[Outcome]) -> float | None:
    """Area under the ROC curve of `score` for the factual class (ties count half). Items without a score get 0.5.
    None when one class is absent."""
    label, _, score = _arrays(outcomes)
    if label.all() or not label.any():
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(label, score))


METRICS = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "precision_hallucination",
    "recall_hallucination",
    "f1_hallucination",
    "auroc",
)
"""What `summarize` reports, each with a 95% interval."""

_BATCH = 128  # resamples per block: bounds memory at 128 x n counts


def _statistic(label: np.ndarray, pred: np.ndarray, score: np.ndarray) -> Callable[..., np.ndarray]:
    """Every metric of METRICS for resampled item indices (shape (..., n)), as an array (len(METRICS), ...)."""
    n = len(label)
    order = np.argsort(score, kind="stable")
    sorted_score = score[order]
    starts = np.flatnonzero(np.r_[True, sorted_score[1:] != sorted_score[:-1]])
    pos_sorted, neg_sorted = label[order], ~label[order]
    masks = {}
    for view, positive in (("", True), ("_hallucination", False)):
        actual, predicted = label == positive, pred == positive
        masks[view] = [
            (a & b).astype(np.float64) for a, b in ((actual, predicted), (~actual, predicted), (actual, ~predicted))
        ]

    def statistic(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        block = np.atleast_2d(indices).reshape(-1, n)
        r = block.shape[0]
        flat = (block + np.arange(r)[:, None] * n).ravel()
        counts = np.bincount(flat, minlength=r * n).reshape(r, n).astype(np.float64)
        out: dict[str, np.ndarray] = {}
        for view, (tp_mask, fp_mask, fn_mask) in masks.items():
            # einsum, not `@`: BLAS would spread these small products over threads that mostly spin.
            tp = np.einsum("ij,j->i", counts, tp_mask)
            fp = np.einsum("ij,j->i", counts, fp_mask)
            fn = np.einsum("ij,j->i", counts, fn_mask)
            precision = np.divide(tp, tp + fp, out=np.zeros(r), where=(tp + fp) > 0)
            recall = np.divide(tp, tp + fn, out=np.zeros(r), where=(tp + fn) > 0)
            out["precision" + view] = precision
            out["recall" + view] = recall
            out["f1" + view] = np.divide(2 * tp, 2 * tp + fp + fn, out=np.zeros(r), where=(2 * tp + fp + fn) > 0)
            if view == "":
                out["accuracy"] = (n - fp - fn) / n
        # AUROC of a resample (Mann-Whitney with tied scores counting half), weighted by the draw counts.
        ranked = counts[:, order]
        wp = np.add.reduceat(ranked * pos_sorted, starts, axis=1)
        wn = np.add.reduceat(ranked * neg_sorted, starts, axis=1)
        below = np.cumsum(wn, axis=1) - wn
        pairs = wp.sum(axis=1) * wn.sum(axis=1)
        u = (wp * (below + 0.5 * wn)).sum(axis=1)
        out["auroc"] = np.divide(u, pairs, out=np.full(r, np.nan), where=pairs > 0)
        values = np.stack([out[name] for name in METRICS])
        return values if indices.ndim > 1 else values[:, 0]

    return statistic


def _intervals(distribution: np.ndarray, level: float) -> list[tuple[float, float] | None]:
    """Percentile intervals per row, as scipy's percentile method takes them; resamples where a metric is
    undefined (AUROC with one class drawn) are left out."""
    out: list[tuple[float, float] | None] = []
    alpha = (1 - level) / 2
    for row in distribution:
        kept = row[~np.isnan(row)]
        if kept.size == 0:
            out.append(None)
            continue
        low, high = np.percentile(kept, [alpha * 100, (1 - alpha) * 100])
        out.append((float(low), float(high)))
    return out


def _bootstrap(
    data: np.ndarray, statistic: Callable[..., Any], *, resamples: int, seed: int, vectorized: bool
) -> np.ndarray:
    from scipy import stats

    with warnings.catch_warnings():
        # An undefined resample (AUROC with one class drawn) is NaN on purpose and left out by `_intervals`; scipy's
        # own interval, which would warn about it, is not used.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (data,),
            statistic,
            n_resamples=resamples,
            batch=_BATCH,
            vectorized=vectorized,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    distribution: np.ndarray = np.atleast_2d(result.bootstrap_distribution)
    return distribution


def bootstrap_ci(
    outcomes: Sequence[Outcome],
    metric: Callable[[Sequence[Outcome]], float | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of any `metric` over items resampled with replacement (scipy, seeded).
    `summarize` takes the same resamples for its own metrics, vectorised."""
    if not outcomes:
        return None

    def one(indices: np.ndarray) -> float:
        value = metric([outcomes[int(i)] for i in indices])
        return np.nan if value is None else float(value)

    distribution = _bootstrap(np.arange(len(outcomes)), one, resamples=resamples, seed=seed, vectorized=False)
    return _intervals(distribution, level)[0]


def summarize(outcomes: Sequence[Outcome], *, seed: int = 0, resamples: int = 1000) -> dict[str, object]:
    """Every metric with its 95% bootstrap interval (the same resamples as `bootstrap_ci` with this seed), both
    class views, and the unverifiable count."""
    out: dict[str, object] = {"n": len(outcomes), "unverifiable": sum(1 for o in outcomes if o.pred is None)}
    intervals: dict[str, tuple[float, float] | None] = {name: None for name in METRICS}
    if outcomes:
        statistic = _statistic(*_arrays(outcomes))
        distribution = _bootstrap(np.arange(len(outcomes)), statistic, resamples=resamples, seed=seed, vectorized=True)
        intervals = dict(zip(METRICS, _intervals(distribution, 0.95), strict=True))
    for view, positive in (("factual", True), ("hallucination", False)):
        point = classification(outcomes, positive=positive)
        for name in ("accuracy", "precision", "recall", "f1"):
            if view == "hallucination" and name == "accuracy":
                continue  # the same number as in the factual view
            key = name if view == "factual" else f"{name}_hallucination"
            out[key] = point[name]
            out[f"{key}_ci95"] = intervals[key]
    out["auroc"] = auroc(outcomes)
    out["auroc_ci95"] = intervals["auroc"]
    return out
