"""Items of unequal difficulty as latent classes: a mixture of Markov chains over labelled items.

Every item belongs to one of C classes; within a class each role is Markov, as in the one-class model. The fit is
the dynamics' one EM (experiments.dynamics.latent.fit_data) with every item's label fixed: maximum likelihood, run
to convergence and said when it is not; smoothing enters only where a calibration file's tables are read. C is
chosen by BIC over 1..3 (1 is the plain model). Each label's classes are ordered by how often their items' verdicts
are right, so class 1 is the easiest, in every replicate.
"""

from __future__ import annotations

import weakref

import numpy as np

from experiments.dynamics.latent import LatentFit, fit_data
from experiments.dynamics.latent_em import LatentData
from experiments.dynamics.model import Floats, Indexed, Mixture

__all__ = ["choose_classes", "fit_mixture", "mixture_from"]

_DATA: weakref.WeakKeyDictionary[Indexed, LatentData] = weakref.WeakKeyDictionary()
"""Each run's turns in EM's arrays, built once per run rather than once per bootstrap replicate."""


def _data(ix: Indexed) -> LatentData:
    if ix not in _DATA:
        _DATA[ix] = LatentData(ix.observations, dict(zip(ix.items, ix.base.tolist(), strict=True)))
    return _DATA[ix]


def _lifted(ix: Indexed, responsibilities: Floats) -> Floats:
    """Per item P(class) as EM's item x label x class (an item's other label impossible)."""
    r = np.zeros((len(ix.items), 2, responsibilities.shape[1]))
    r[np.arange(len(ix.items)), ix.label.astype(int), :] = responsibilities
    return r


def _per_item(ix: Indexed, r: Floats) -> Floats:
    """EM's item x label x class at each item's own label: P(class | the item)."""
    mine = r[np.arange(len(ix.items)), ix.label.astype(int), :]
    return np.asarray(mine / np.maximum(mine.sum(1, keepdims=True), 1e-300), dtype=np.float64)


def _made(ix: Indexed, scale: Floats | None, resp: Floats, fit: LatentFit) -> Mixture:
    """The mixture whose every part comes from `fit`'s final responsibilities (`resp`, per item): each class's
    counts (what a calibration file stores) and the fit's class shares (what it stores beside them, the M step of
    the same responsibilities), so the file's shares are the ones its own counts imply."""
    within = np.ones(len(ix.items)) if scale is None else scale
    return Mixture(
        components=[ix.behaviour(within * resp[:, c]) for c in range(resp.shape[1])],
        shares=fit.shares,
        responsibilities=resp,
        loglik=fit.loglik,
        parameters=fit.parameters,
        steps=fit.steps,
        converged=fit.converged,
    )


def fit_mixture(
    ix: Indexed, classes: int, *, scale: Floats | None = None, start: Floats | None = None, seed: int = 0
) -> Mixture:
    """The mixture of `classes` latent classes by the one EM; `scale` counts items (a bootstrap replicate's
    multiplicities, on top of their weights), `start` warm-starts from per-item class responsibilities (one run
    instead of three)."""
    data = _data(ix) if scale is None else _data(ix).scaled(scale)
    lifted = None if start is None else _lifted(ix, start)
    # a replicate is read for its spread, not stored: EM to convergence, not on to the fixed point a file needs
    fit = fit_data(data, classes, seed=seed, start=lifted, settle=scale is None)
    return _made(ix, scale, _per_item(ix, fit.responsibilities), fit)


def mixture_from(ix: Indexed, responsibilities: Floats, fit: LatentFit) -> Mixture:
    """The mixture whose items have these class responsibilities, taken as they are (`fit`'s at its final E step,
    with labelled pseudo-items for its claims): its counts and shares are that fit's own, with no further step
    under other tables."""
    return _made(ix, None, responsibilities, fit)


def choose_classes(ix: Indexed, *, most: int = 3, seed: int = 0) -> tuple[Mixture, dict[int, float]]:
    """The mixture with the lowest BIC among 1..`most` classes, and every candidate's BIC."""
    fits = {c: fit_mixture(ix, c, seed=seed) for c in range(1, most + 1)}
    bics = {c: f.bic(len(ix.items)) for c, f in fits.items()}
    return fits[min(bics, key=lambda c: bics[c])], bics
