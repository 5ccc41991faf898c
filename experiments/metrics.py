"""Metrics with unverifiable items counted wrong, AUROC from scores, and seeded bootstrap confidence intervals.

An item with no prediction (unverifiable, no claims, or failed) is counted wrong: in the confusion matrix it lands
on the side opposite its label (a false negative for a positive item, a false positive for a negative one).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Outcome", "auroc", "bootstrap_ci", "classification", "summarize"]


@dataclass(frozen=True)
class Outcome:
    """One scored item."""

    label: bool
    """True when the item is factual."""
    pred: bool | None
    """The prediction; None when there is none."""
    score: float | None = None
    """Higher = more factual."""


def classification(outcomes: Sequence[Outcome], *, positive: bool = True) -> dict[str, float]:
    """Accuracy, precision, recall and F1 for the class `positive` (True = factual, False = hallucinated)."""
    tp = fp = fn = tn = 0
    for o in outcomes:
        # A missing prediction is wrong whatever the label: it takes the side opposite the label.
        pred = o.pred if o.pred is not None else not o.label
        actual_pos, pred_pos = o.label == positive, pred == positive
        if actual_pos and pred_pos:
            tp += 1
        elif pred_pos:
            fp += 1
        elif actual_pos:
            fn += 1
        else:
            tn += 1
    n = len(outcomes)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": (tp + tn) / n if n else 0.0, "precision": precision, "recall": recall, "f1": f1}


def auroc(outcomes: Sequence[Outcome]) -> float | None:
    """Area under the ROC curve of `score` for the factual class (Mann-Whitney, ties count half). Items without a
    score get 0.5. None when one class is absent."""
    positives = [o.score if o.score is not None else 0.5 for o in outcomes if o.label]
    negatives = [o.score if o.score is not None else 0.5 for o in outcomes if not o.label]
    if not positives or not negatives:
        return None
    ranked = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        average_rank = (i + 1 + j) / 2  # 1-based ranks i+1..j share their mean
        rank_sum += average_rank * sum(flag for _, flag in ranked[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def bootstrap_ci(
    outcomes: Sequence[Outcome],
    metric: Callable[[Sequence[Outcome]], float | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `metric` over items resampled with replacement (seeded)."""
    if not outcomes:
        return None
    rng = random.Random(seed)
    n = len(outcomes)
    values = []
    for _ in range(resamples):
        value = metric([outcomes[rng.randrange(n)] for _ in range(n)])
        if value is not None:
            values.append(value)
    if not values:
        return None
    values.sort()
    low = values[int((1 - level) / 2 * (len(values) - 1))]
    high = values[int((1 + level) / 2 * (len(values) - 1) + 0.5)]
    return low, high


def summarize(outcomes: Sequence[Outcome], *, seed: int = 0, resamples: int = 1000) -> dict[str, object]:
    """Every metric with its 95% bootstrap interval, both class views, and the unverifiable count."""
    out: dict[str, object] = {"n": len(outcomes), "unverifiable": sum(1 for o in outcomes if o.pred is None)}
    for view, positive in (("factual", True), ("hallucination", False)):
        for name in ("accuracy", "precision", "recall", "f1"):
            if view == "hallucination" and name == "accuracy":
                continue  # the same number as in the factual view

            def metric(sample: Sequence[Outcome], name: str = name, positive: bool = positive) -> float:
                return classification(sample, positive=positive)[name]

            key = name if view == "factual" else f"{name}_hallucination"
            out[key] = metric(outcomes)
            out[f"{key}_ci95"] = bootstrap_ci(outcomes, metric, resamples=resamples, seed=seed)
    out["auroc"] = auroc(outcomes)
    out["auroc_ci95"] = bootstrap_ci(outcomes, auroc, resamples=resamples, seed=seed)
    return out
