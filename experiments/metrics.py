"""Metrics with unverifiable items counted wrong, AUROC from scores, and seeded bootstrap confidence intervals.

An item with no prediction (unverifiable, no claims, or failed) is counted wrong: in the confusion matrix it lands
on the side opposite its label (a false negative for a positive item, a false positive for a negative one).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

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


@functools.lru_cache(maxsize=1)
def _resamples(n: int, resamples: int, seed: int) -> np.ndarray:
    """Item indices of each bootstrap resample (rows), seeded: exactly the indices `random.Random(seed).randrange(n)`
    drew one by one before the metrics were vectorised, so intervals did not change. Python's Mersenne Twister
    state is loaded into numpy's, and randrange's rejection sampling (k-bit draws, those >= n discarded) is replayed
    on whole arrays. Cached: a run's summaries (the method and its baselines, same n and seed) share one draw."""
    _, internal, _ = random.Random(seed).getstate()
    twister = np.random.RandomState()
    # (name, key, position, has a cached Gaussian, the cached Gaussian): numpy's legacy state tuple.
    twister.set_state(("MT19937", np.array(internal[:-1], dtype=np.uint32), int(internal[-1]), 0, 0.0))
    if n >= 2**31:
        raise ValueError(f"{n} items: the bootstrap replays 32-bit draws and supports fewer than 2**31")
    need = n * resamples
    if need == 0:
        return np.zeros((resamples, n), dtype=np.intp)
    bits = n.bit_length()
    accepted: list[np.ndarray] = []
    got = 0
    while got < need:
        # Enough raw 32-bit words for what is missing, given the share the rejection step keeps (n / 2**bits).
        raw = twister.randint(0, 2**32, size=int((need - got) * 2**bits / n * 1.05) + 64, dtype=np.uint32)
        candidates = raw >> np.uint32(32 - bits)
        kept = candidates[candidates < n]
        accepted.append(kept)
        got += len(kept)
    # Indices below 2**31: int32 halves the memory of the draw (n x resamples) and needs no widening copy.
    rows = np.concatenate(accepted)[:need].view(np.int32).reshape(resamples, n)
    rows.setflags(write=False)
    return rows


def _interval(values: Sequence[float] | np.ndarray, level: float) -> tuple[float, float] | None:
    ordered = np.sort(np.asarray(values, dtype=float))
    if ordered.size == 0:
        return None
    low = ordered[int((1 - level) / 2 * (ordered.size - 1))]
    high = ordered[int((1 + level) / 2 * (ordered.size - 1) + 0.5)]
    return float(low), float(high)


def bootstrap_ci(
    outcomes: Sequence[Outcome],
    metric: Callable[[Sequence[Outcome]], float | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of any `metric` over items resampled with replacement (seeded). `summarize`
    computes the same intervals for its own metrics without a Python loop over resamples."""
    if not outcomes:
        return None
    values = [
        value
        for row in _resamples(len(outcomes), resamples, seed)
        if (value := metric([outcomes[i] for i in row])) is not None
    ]
    return _interval(values, level)


_CHUNK = 128  # resamples per block: bounds memory at n x 128 counts


def _bootstrap_all(outcomes: Sequence[Outcome], *, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Every summary metric on every resample, as arrays (resamples where AUROC is undefined hold NaN).

    A resample is represented by how often it draws each item (a counts row), so each metric is a few matrix
    products instead of a Python pass per resample."""
    n = len(outcomes)
    label = np.array([o.label for o in outcomes])
    pred = np.array([o.pred if o.pred is not None else not o.label for o in outcomes])
    score = np.array([o.score if o.score is not None else 0.5 for o in outcomes], dtype=float)
    order = np.argsort(score, kind="stable")
    sorted_score = score[order]
    starts = np.flatnonzero(np.r_[True, sorted_score[1:] != sorted_score[:-1]])
    pos_sorted, neg_sorted = label[order], ~label[order]
    # Per view (factual positive, hallucination positive): the items that are TP, FP and FN when drawn once.
    masks = {}
    for view, positive in (("", True), ("_hallucination", False)):
        actual, predicted = label == positive, pred == positive
        masks[view] = [(a & b).astype(np.float64) for a, b in ((actual, predicted), (~actual, predicted),
                                                                (actual, ~predicted))]  # fmt: skip
    out: dict[str, list[np.ndarray]] = {}
    rows = _resamples(n, resamples, seed)
    for begin in range(0, resamples, _CHUNK):
        block = rows[begin : begin + _CHUNK]
        r = block.shape[0]
        flat = (block + np.arange(r)[:, None] * n).ravel()
        counts = np.bincount(flat, minlength=r * n).reshape(r, n).astype(np.float64)
        for view, (tp_mask, fp_mask, fn_mask) in masks.items():
            # einsum, not `@`: BLAS would spread these small products over threads that mostly spin, which costs
            # more CPU than it saves.
            tp = np.einsum("ij,j->i", counts, tp_mask)
            fp = np.einsum("ij,j->i", counts, fp_mask)
            fn = np.einsum("ij,j->i", counts, fn_mask)
            tn = n - tp - fp - fn
            precision = np.divide(tp, tp + fp, out=np.zeros(r), where=(tp + fp) > 0)
            recall = np.divide(tp, tp + fn, out=np.zeros(r), where=(tp + fn) > 0)
            f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(r), where=(precision + recall) > 0)
            metrics = {"precision": precision, "recall": recall, "f1": f1}
            if view == "":
                metrics["accuracy"] = (tp + tn) / n
            for name, values in metrics.items():
                out.setdefault(name + view, []).append(values)
        ranked = counts[:, order]
        wp = np.add.reduceat(ranked * pos_sorted, starts, axis=1)
        wn = np.add.reduceat(ranked * neg_sorted, starts, axis=1)
        below = np.cumsum(wn, axis=1) - wn
        pairs = wp.sum(axis=1) * wn.sum(axis=1)
        u = (wp * (below + 0.5 * wn)).sum(axis=1)
        out.setdefault("auroc", []).append(np.divide(u, pairs, out=np.full(r, np.nan), where=pairs > 0))
    return {name: np.concatenate(parts) for name, parts in out.items()}


def summarize(outcomes: Sequence[Outcome], *, seed: int = 0, resamples: int = 1000) -> dict[str, object]:
    """Every metric with its 95% bootstrap interval (the same resamples as `bootstrap_ci` with this seed), both
    class views, and the unverifiable count."""
    out: dict[str, object] = {"n": len(outcomes), "unverifiable": sum(1 for o in outcomes if o.pred is None)}
    sampled = _bootstrap_all(outcomes, resamples=resamples, seed=seed) if outcomes else {}
    for view, positive in (("factual", True), ("hallucination", False)):
        point = classification(outcomes, positive=positive)
        for name in ("accuracy", "precision", "recall", "f1"):
            if view == "hallucination" and name == "accuracy":
                continue  # the same number as in the factual view
            key = name if view == "factual" else f"{name}_hallucination"
            out[key] = point[name]
            out[f"{key}_ci95"] = _interval(sampled[key], 0.95) if sampled else None
    out["auroc"] = auroc(outcomes)
    aurocs = sampled.get("auroc")
    out["auroc_ci95"] = _interval(aurocs[~np.isnan(aurocs)], 0.95) if aurocs is not None else None
    return out
