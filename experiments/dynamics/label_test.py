"""What the labelled claims of a partly labelled run say about its fit (experiments.dynamics.latent).

Labelled claims enter the fit with their label fixed, so an in-sample test would flatter it: each labelled claim is
scored by a fit with its fold's labels hidden (k-fold cross-validation, `folds_of`), and those held-out p_factual
are compared with the labels (Spiegelhalter's Z: is sum (label - p) what the p's own variance allows?). A logistic
regression of the label on the held-out log-odds corrects the file's p_factual (slope and shift), kept when it fits
the labels better than none and lowers the log loss of labels it did not see (a second cross-validation, over the
held-out scores). A rejection leaves the file not calibrated. The label is regressed on the log-odds, so claims
chosen by their p_factual (the desk's queue, `to_label`) do not bias it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from debate.calibration import MIN_LABELS, HeldOut, Labels, Recalibration
from debate.engine import PosteriorModel, TurnContext
from experiments.dynamics.observe import Observation

__all__ = ["FOLDS", "MIN_EACH", "folds_of", "labels_of"]

MIN_EACH = 5
"""Labelled claims of each label among the `MIN_LABELS` (a correction fitted on one label says nothing of the
other)."""
_LEVEL = 0.05
"""The likelihood-ratio test's level for keeping the correction."""
_CLIP = 30.0
"""Log-odds beyond this are read as this (p_factual within 1e-13 of 0 or 1)."""


def _log_odds(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return math.copysign(_CLIP, p - 0.5)
    return max(-_CLIP, min(_CLIP, math.log(p / (1 - p))))


def _turns(seen: Sequence[Observation]) -> dict[str, list[TurnContext]]:
    turns: dict[str, list[TurnContext]] = {}
    for o in seen:
        turns.setdefault(o.item, []).append(TurnContext(o.role, o.state, o.shown, o.verdict))
    return turns


def _spiegelhalter(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spiegelhalter's Z of labels `y` against probabilities `p`, and its two-sided p-value."""
    from scipy.stats import norm  # the experiments extra

    weight = 1 - 2 * p
    spread = math.sqrt(float((weight**2 * p * (1 - p)).sum()))
    z = float(((y - p) * weight).sum()) / spread if spread > 0 else 0.0
    return z, float(2 * norm.sf(abs(z)))


def _agreement(p: np.ndarray, y: np.ndarray) -> str:
    """Spiegelhalter's Z of the labels against the probabilities, in a line."""
    z, p_value = _spiegelhalter(p, y)
    said = "agree with" if p_value >= _LEVEL else "disagree with"
    return f"the {len(y)} labelled claims {said} the fitted p_factual (Spiegelhalter Z = {z:.2f}, p = {p_value:.3g})"


def _loglik(y: np.ndarray, odds: np.ndarray) -> float:
    return float((y * -np.logaddexp(0, -odds) + (1 - y) * -np.logaddexp(0, odds)).sum())


def _correction(x: np.ndarray, y: np.ndarray) -> Recalibration | None:
    """The logistic correction of the log-odds `x` by labels `y`, when it beats none at `_LEVEL`."""
    from scipy.stats import chi2  # the experiments extra
    from sklearn.linear_model import LogisticRegression  # the experiments extra

    fit = LogisticRegression(C=np.inf, max_iter=1000).fit(x[:, None], y.astype(int))
    slope, shift = float(fit.coef_[0][0]), float(fit.intercept_[0])
    statistic = max(0.0, 2 * (_loglik(y, slope * x + shift) - _loglik(y, x)))
    p_value = float(chi2.sf(statistic, 2))
    if p_value >= _LEVEL:
        return None
    return Recalibration(slope=slope, shift=shift, labelled=len(y), statistic=statistic, p_value=p_value)


FOLDS = 5
"""Folds of the correction's cross-validation (fewer when there are fewer labelled claims of a label)."""


def _mean_log_loss(y: np.ndarray, odds: np.ndarray) -> float:
    return -_loglik(y, odds) / max(1, len(y))


def _held_out(x: np.ndarray, y: np.ndarray, correct: bool, fit_folds: int) -> tuple[HeldOut, bool]:
    """The labels' test of the p_factual the file will give, and whether the correction is kept: each label's
    log-odds corrected by the correction fitted on the other folds (identity where none beats no correction),
    kept when that lowers the held-out log loss. Folds are dealt by rank of the log-odds, so each spans them."""
    uncorrected = _mean_log_loss(y, x)
    folds = min(FOLDS, int(min(y.sum(), len(y) - y.sum()))) if correct else 0
    corrected = x.copy()
    if folds >= 2:
        fold = np.empty(len(x), dtype=int)
        fold[np.argsort(x, kind="stable")] = np.arange(len(x)) % folds
        for k in range(folds):
            train = fold != k
            found = _correction(x[train], y[train]) if min(y[train].sum(), (1 - y[train]).sum()) >= 2 else None
            if found is not None:
                corrected[~train] = found.slope * x[~train] + found.shift
    keep = folds >= 2 and _mean_log_loss(y, corrected) < uncorrected
    odds = corrected if keep else x
    z, p_value = _spiegelhalter(1 / (1 + np.exp(-odds)), y)
    test = HeldOut(
        labelled=len(y),
        fit_folds=fit_folds,
        folds=folds if keep else 0,
        z=z,
        p_value=p_value,
        log_loss=_mean_log_loss(y, odds),
        log_loss_uncorrected=uncorrected,
    )
    return test, keep


def _spread(candidates: list[tuple[float, str]], count: int) -> list[str]:
    """`count` claims at evenly spaced ranks of p_factual."""
    ranked = [item for _, item in sorted(candidates)]
    if count >= len(ranked):
        return ranked
    picks = np.linspace(0, len(ranked) - 1, count).round().astype(int)
    return [ranked[i] for i in dict.fromkeys(picks.tolist())]


def folds_of(labels: Mapping[str, bool | None], seed: int) -> list[set[str]]:
    """The labelled claims dealt into at most `FOLDS` folds, each label spread evenly over them (seeded)."""
    known = [(item, label) for item, label in labels.items() if label is not None]
    count = min(FOLDS, len(known))
    if count < 2:
        return []
    rng = np.random.default_rng(seed)
    folds: list[set[str]] = [set() for _ in range(count)]
    dealt = 0
    for flag in (True, False):
        mine = [item for item, label in known if label is flag]
        for item in (mine[i] for i in rng.permutation(len(mine))):
            folds[dealt % count].add(item)
            dealt += 1
    return folds


def labels_of(
    seen: Sequence[Observation],
    labels: Mapping[str, bool | None],
    model: PosteriorModel,
    held: Mapping[str, float] | None = None,
    folds: int = 0,
) -> Labels:
    """What the run's labels say about `model` (fitted on it): their agreement with the p_factual each was given by
    a fit that did not see it (`held`: per labelled claim, from `folds` folds; None: `model` itself never saw them),
    the correction they
    bring, or, with too few, the assumption that stands in and the claims to label first."""
    turns = _turns(seen)
    p = {item: model.p_factual(t) for item, t in turns.items()}
    scored = p if held is None else {**p, **held}
    known = [(item, label) for item, label in labels.items() if label is not None and scored.get(item) is not None]
    counts = [sum(label is flag for _, label in known) for flag in (True, False)]
    enough = len(known) >= MIN_LABELS and min(counts) >= MIN_EACH
    agreement = correction = held_out = None
    if known:
        probabilities = np.array([scored[item] for item, _ in known], dtype=np.float64)
        y = np.array([float(label) for _, label in known])
        agreement = _agreement(probabilities, y)
        x = np.array([_log_odds(float(v)) for v in probabilities])
        held_out, keep = _held_out(x, y, enough, folds)
        if enough and keep:
            correction = _correction(x, y)
    needed = 0 if enough else max(MIN_LABELS - len(known), *(MIN_EACH - c for c in counts), 1)
    unlabelled = [(float(v), item) for item, v in p.items() if labels.get(item) is None and v is not None]
    return Labels(
        claims=len(turns),
        labelled=len(known),
        orientation="labels" if enough else "assumption",
        agreement=agreement,
        recalibration=correction,
        held_out=held_out,
        needed=needed,
        to_label=_spread(unlabelled, needed) if needed else [],
    )
