"""Items of unequal difficulty as latent classes: a mixture of Markov chains fitted by EM.

Every item belongs to one of C classes; within a class each role is Markov, as in the one-class model. The E step
weighs each item's turns under each class's behaviour (and the share of its true label's items in that class); the
M step re-counts each class's contexts with those weights. C is chosen by BIC over 1..3 (1 is the plain model).
Classes are ordered by how often their items' verdicts are right, so class 1 is the easiest, in every replicate.
"""

from __future__ import annotations

import numpy as np

from experiments.dynamics.em import TOLERANCE
from experiments.dynamics.model import Floats, Indexed, Mixture

__all__ = ["choose_classes", "fit_mixture", "mixture_from", "one_class"]

PSEUDO = 0.5
"""Pseudo-counts per context and class in EM, so an empty cell is not a certainty."""


def one_class(ix: Indexed, scale: Floats | None = None) -> Mixture:
    """The plain model as a one-class mixture (its likelihood on the same footing as the others)."""
    resp = np.ones((len(ix.items), 1))
    return _finish(ix, scale, resp, _mstep(ix, ix.weights(scale), resp))


def _mstep(ix: Indexed, m: Floats, resp: Floats) -> tuple[Floats, Floats]:
    w = resp * m[:, None]
    p = (w.T @ ix.true + PSEUDO) / (w.T @ ix.turns + 2 * PSEUDO)
    shares = np.stack([w[ix.label == label].sum(0) + 1e-9 for label in (False, True)])
    return p, shares / shares.sum(1, keepdims=True)


def _estep(ix: Indexed, m: Floats, p: Floats, shares: Floats) -> tuple[Floats, float]:
    log = ix.true @ np.log(p).T + (ix.turns - ix.true) @ np.log1p(-p).T + np.log(shares[ix.label.astype(int)])
    top = log.max(1, keepdims=True)
    total = top[:, 0] + np.log(np.exp(log - top).sum(1))
    return np.exp(log - total[:, None]), float((m * total).sum())


def _correct(ix: Indexed) -> Floats:
    """Per item, the share of its turns whose verdict is right."""
    right = np.where(ix.label[:, None], ix.true, ix.turns - ix.true).sum(1)
    return np.asarray(right / np.maximum(ix.turns.sum(1), 1), dtype=np.float64)


def _ordered(ix: Indexed, m: Floats, resp: Floats) -> Floats:
    """Classes easiest first: the weighted share of their items' turns that are right."""
    turns = (m * ix.turns.sum(1))[:, None]
    accuracy = (resp * _correct(ix)[:, None] * turns).sum(0) / np.maximum((resp * turns).sum(0), 1e-12)
    return np.asarray(resp[:, np.argsort(-accuracy)], dtype=np.float64)


def _run(ix: Indexed, m: Floats, resp: Floats, iterations: int) -> tuple[Floats, float]:
    before = -np.inf
    loglik = before
    for _ in range(iterations):
        p, shares = _mstep(ix, m, resp)
        resp, loglik = _estep(ix, m, p, shares)
        # an absolute stop scaled by the items' weight (a relative one stops early on a large log-likelihood)
        if loglik - before < TOLERANCE * max(1.0, float(m.sum())):
            break
        before = loglik
    return resp, loglik


def _starts(ix: Indexed, classes: int, seed: int) -> list[Floats]:
    """A split of the items by their share of right verdicts, and two random soft starts."""
    rng = np.random.default_rng(seed)
    rank = np.argsort(np.argsort(_correct(ix) + rng.uniform(0, 1e-6, len(ix.items))))
    group = rank * classes // len(ix.items)
    split = np.full((len(ix.items), classes), 0.1 / max(1, classes - 1))
    split[np.arange(len(ix.items)), group] = 0.9
    return [split] + [rng.dirichlet(np.ones(classes), len(ix.items)) for _ in range(2)]


def _finish(ix: Indexed, scale: Floats | None, resp: Floats, params: tuple[Floats, Floats]) -> Mixture:
    p, shares = params
    resp, loglik = _estep(ix, ix.weights(scale), p, shares)
    return _made(ix, scale, resp, loglik)


def _made(ix: Indexed, scale: Floats | None, resp: Floats, loglik: float) -> Mixture:
    """The mixture whose every part comes from one set of responsibilities `resp`: each class's counts (what a
    calibration file stores) and each label's class shares (what it stores beside them), so the file's shares are
    the ones its own counts imply."""
    classes = resp.shape[1]
    within = np.ones(len(ix.items)) if scale is None else scale
    components = [ix.behaviour(within * resp[:, c]) for c in range(classes)]
    w = resp * ix.weights(scale)[:, None]
    shares: dict[bool, list[float]] = {}
    for label in (False, True):
        mass = w[ix.label == label].sum(0)
        shares[label] = (mass / mass.sum()).tolist() if mass.sum() > 0 else [1.0 / classes] * classes
    labels = len(set(ix.label.tolist()))
    return Mixture(
        components=components,
        shares=shares,
        responsibilities=resp,
        loglik=loglik,
        parameters=classes * ix.true.shape[1] + (classes - 1) * labels,
    )


def fit_mixture(
    ix: Indexed,
    classes: int,
    *,
    scale: Floats | None = None,
    start: Floats | None = None,
    seed: int = 0,
    iterations: int = 300,
) -> Mixture:
    """EM with `classes` latent classes; `scale` counts items (a bootstrap replicate's multiplicities, on top of
    their weights), `start` warm-starts from responsibilities (one run instead of three)."""
    m = ix.weights(scale)
    if classes == 1:
        return one_class(ix, scale)
    best: tuple[float, Floats] | None = None
    for resp in [start] if start is not None else _starts(ix, classes, seed):
        resp, loglik = _run(ix, m, resp, iterations)
        if best is None or loglik > best[0]:
            best = (loglik, resp)
    assert best is not None
    resp = _ordered(ix, m, best[1])
    return _finish(ix, scale, resp, _mstep(ix, m, resp))


def mixture_from(ix: Indexed, responsibilities: Floats, loglik: float) -> Mixture:
    """The mixture whose items have these class responsibilities, taken as they are (a fit made elsewhere, the
    latent one, at its final E step; `loglik` is that fit's): its counts and shares are that fit's own, with no
    further step under other tables."""
    return _made(ix, None, responsibilities, loglik)


def choose_classes(ix: Indexed, *, most: int = 3, seed: int = 0) -> tuple[Mixture, dict[int, float]]:
    """The mixture with the lowest BIC among 1..`most` classes, and every candidate's BIC."""
    fits = {c: fit_mixture(ix, c, seed=seed) for c in range(1, most + 1)}
    bics = {c: f.bic(len(ix.items)) for c, f in fits.items()}
    return fits[min(bics, key=lambda c: bics[c])], bics
