"""A fit where some or all true labels are missing: the claim's truth is latent (Dawid-Skene over the chain's roles,
each role Markov in its context as in the labelled fit).

Every item falls in one of 2C clusters, (true label, class): a cluster has its own P(verdict true) per context
(role, state, verdicts shown) and its weight (the prior share of factual claims times the label's class share). EM
alternates: each item's responsibilities over the clusters from its turns, then each cluster's rates and weights
re-counted with them. Nothing in the turns says which clusters are factual: a cluster and its mirror image (the same
rates with "true" and "false" swapped, labelled the other way) explain them equally well. The fit starts from each
item's majority verdict, which is the assumption that the agents are right more often than wrong, and keeps it. A
class of items that fools the agents breaks it and is, without labels, invisible: its items look like items of the
other label, and a one-class fit explains them as well as the truth does.

Labels break the symmetry. A labelled claim enters EM with its label fixed (semi-supervised: its clusters of the
other label are impossible), so every cluster labelled claims fall in is oriented by them, the class that fools the
agents included; a cluster no labelled claim reaches keeps the assumption (experiments.dynamics.clusters). The
labels' test of the fit is cross-validated (experiments.dynamics.label_test): each fold of labelled claims is scored
by a fit that did not see its labels (`held_out_fits`). The fitted clusters become weighted labelled pseudo-items
(clusters.expand), which every other part of the dynamics (the tables, the calibration file, the predictions, the
checks) reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from experiments.dynamics.family import FamilyName, Pulled, PulledRates
from experiments.dynamics.latent_em import LatentData, LatentEm
from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["LatentFit", "fit_data", "fit_latent", "held_out_fits"]

_TIE = 1e-9
"""Shares of "true" verdicts closer than this are a tie for the one-class fit's orientation (`_oriented`)."""


@dataclass(frozen=True)
class LatentFit:
    """The fitted clusters of a partly or wholly unlabelled run (maximum likelihood: no pseudo-count enters EM)."""

    items: list[str]
    responsibilities: Floats
    """item x label (0 hallucinated, 1 factual) x class: P(cluster | the item's turns)."""
    prior: float
    """The fitted share of factual claims (the stated base rate when one was given)."""
    shares: dict[bool, list[float]]
    """Per label, the share of its items in each class (easiest first)."""
    loglik: float
    parameters: int
    steps: int = 0
    """EM steps the chosen start took."""
    converged: bool = True
    """False: EM reached its cap (experiments.dynamics.em.MAX_EVALUATIONS) first."""
    base_rate: float | None = None
    """The share of factual claims stated by the user and held fixed in EM (None: fitted)."""
    labelled: Floats | None = None
    """label x class: the labelled claims' summed responsibilities (how many labels reach each cluster)."""
    family: FamilyName = "tables"
    """How each cluster's rates are tied (experiments.dynamics.family)."""
    pulled: PulledRates | None = None
    """The pulled family's fitted counts (None: the tables)."""

    @property
    def classes(self) -> int:
        return int(self.responsibilities.shape[2])

    def bic(self) -> float:
        return -2 * self.loglik + self.parameters * float(np.log(max(2, len(self.items))))


def _start(data: LatentData, classes: int, rng: np.random.Generator, split: bool, mirrored: bool = False) -> Floats:
    factual = data.majority()
    if mirrored:
        # the last class starts as the mirror image: its items' majority verdict wrong (the items that fool the
        # agents); EM keeps it only where the turns favour it
        klass = np.full((len(data.items), classes), 1.0 / classes)
        guess = np.stack(
            [np.stack([1 - factual, factual], 1)] * (classes - 1) + [np.stack([factual, 1 - factual], 1)], 2
        )
        return _allowed(data, guess * klass[:, None, :])
    if split:
        # items by the share of their verdicts that are right, easiest first: under a claim's label where it has
        # one (an item that fools the agents is hard, not decided), else under its majority verdict (how unanimous
        # its debate was)
        said = data.true.sum(1) / np.maximum(data.turns.sum(1), 1)
        right = np.where(data.known >= 0, np.where(data.known == 1, said, 1 - said), 0.5 + np.abs(said - 0.5))
        rank = np.argsort(np.argsort(-right + rng.uniform(0, 1e-6, len(data.items))))
        klass = np.full((len(data.items), classes), 0.1 / max(1, classes - 1))
        klass[np.arange(len(data.items)), rank * classes // len(data.items)] = 0.9 if classes > 1 else 1.0
    else:
        klass = rng.dirichlet(np.ones(classes), len(data.items))
    r = np.stack([(1 - factual)[:, None] * klass, factual[:, None] * klass], axis=1)
    return _allowed(data, r)


def _allowed(data: LatentData, r: Floats) -> Floats:
    """`r` with each labelled item's other label taken out, normalised per item."""
    r = r * np.exp(data.mask)[:, :, None]
    return np.asarray(r / r.sum((1, 2), keepdims=True), dtype=np.float64)


def _ordered(data: LatentData, r: Floats) -> Floats:
    """Each label's classes easiest first (the share of their turns that are right for that label, each item
    weighed by its responsibility and weight)."""
    out = np.empty_like(r)
    turns = data.turns.sum(1)
    w = data.weight[:, None]
    for label in (0, 1):
        said = data.true.sum(1) if label else turns - data.true.sum(1)
        weight = w * r[:, label, :] * turns[:, None]
        accuracy = (w * r[:, label, :] * said[:, None]).sum(0) / np.maximum(weight.sum(0), 1e-12)
        out[:, label, :] = r[:, label, np.argsort(-accuracy)]
    return out


def _oriented(data: LatentData, r: Floats) -> Floats:
    """The one-class fit as the assumption has it: the factual cluster is the one whose turns say "true" more often
    (EM from the majority start lands there; this makes it so whatever the start). Labels orient a fit themselves."""
    if r.shape[2] != 1 or (data.known >= 0).any():
        return r
    said = data.true.sum(1) / np.maximum(data.turns.sum(1), 1)
    factual, hallucinated = data.weight * r[:, 1, 0], data.weight * r[:, 0, 0]
    factual_says_true = (factual * said).sum() / max(factual.sum(), 1e-12)
    hallucinated_says_true = (hallucinated * said).sum() / max(hallucinated.sum(), 1e-12)
    # a tie (both clusters' turns say "true" alike: the turns cannot orient the fit) keeps EM's own orientation, the
    # majority start's, rather than letting the last bit of rounding in these sums decide
    return r if factual_says_true >= hallucinated_says_true - _TIE else r[:, ::-1, :]


def fit_latent(
    seen: Sequence[Observation],
    classes: int,
    *,
    seed: int = 0,
    base_rate: float | None = None,
    family: FamilyName = "tables",
) -> LatentFit:
    """EM over (label, class) clusters to convergence, each labelled claim fixed to its label and every other label
    taken as unknown (`fit_data` on the run's turns, each claim counted once)."""
    return fit_data(LatentData(seen), classes, seed=seed, base_rate=base_rate, family=family)


def fit_data(
    data: LatentData,
    classes: int,
    *,
    seed: int = 0,
    base_rate: float | None = None,
    family: FamilyName = "tables",
    start: Floats | None = None,
    settle: bool = True,
) -> LatentFit:
    """The one EM of the dynamics, for every fit (labelled, partly labelled, unlabelled, a bootstrap replicate):
    the best of a start split by the share of each item's verdicts that are right, a random one and (with claims
    unlabelled) one whose last class is the mirror image, each from the majority verdict (a labelled claim's own
    label); or from `start` alone (responsibilities, item x label x
    class: a warm start). `base_rate`: the share of factual claims, stated and held fixed (None: fitted by maximum
    likelihood). `family`: how each cluster's rates are tied (experiments.dynamics.family). `settle`: to EM's fixed
    point in the responsibilities (what a file stores; off for a bootstrap replicate, LatentEm.run)."""
    em = LatentEm(data, classes, base_rate, family)
    rng = np.random.default_rng(seed)
    if start is not None:
        starts = [_allowed(data, start)]
    else:
        starts = [_start(data, classes, rng, True)]
        if classes > 1:
            starts.append(_start(data, classes, rng, False))
        if classes > 1 and (data.known < 0).any():
            # with every claim labelled the mirror image is impossible: its start would leave a class empty
            starts.append(_start(data, classes, rng, False, mirrored=True))
    best: tuple[float, Floats, int, bool] | None = None
    for each in starts:
        r, loglik, steps, converged = em.run(each, settle=False)
        if best is None or loglik > best[0]:
            best = (loglik, r, steps, converged)
    assert best is not None
    loglik, r, steps, converged = best
    oriented = _oriented(data, _ordered(data, r))
    if settle or (base_rate is not None and oriented[:, 1].sum() != r[:, 1].sum()):
        # the chosen start on to EM's fixed point; and with the share held fixed the mirror image is no longer as
        # likely: fit the oriented one under it
        oriented, loglik, more, converged = em.run(oriented, settle=settle)
        steps += more
    return _latent(data, em, _oriented(data, _ordered(data, oriented)), loglik, steps, converged)


def _within(weights: Floats) -> list[float]:
    """A label's class shares from its clusters' weights (even where the label has no claim: no share to fit)."""
    total = float(weights.sum())
    return (weights / total).tolist() if total > 0 else [1.0 / len(weights)] * len(weights)


def _latent(data: LatentData, em: LatentEm, r: Floats, loglik: float, steps: int, converged: bool) -> LatentFit:
    x, weights = em.mstep(r)
    free = 2 * em.classes - 1 - (1 if em.base_rate is not None else 0)
    labelled = data.known >= 0
    family = em.family
    return LatentFit(
        items=data.items,
        responsibilities=r,
        prior=float(weights[1].sum() / weights.sum()),
        shares={bool(label): _within(weights[label]) for label in (0, 1)},
        loglik=loglik,
        parameters=family.parameters(em.classes) + free,
        steps=steps,
        converged=converged,
        base_rate=em.base_rate,
        labelled=em.mass(r * labelled[:, None, None]),
        family=family.name,
        pulled=family.counts(*em.counted(r), x, em.classes) if isinstance(family, Pulled) else None,
    )


def held_out_fits(seen: Sequence[Observation], fit: LatentFit, folds: list[set[str]]) -> list[LatentFit]:
    """Per fold of labelled items, the fit (as many classes as `fit`) with that fold's labels hidden: EM to
    convergence under the fold's own likelihood, started from `fit` with the fold's items scored unlabelled."""
    out = []
    for fold in folds:
        data = LatentData([replace(o, label=None) if o.item in fold else o for o in seen])
        if data.items != fit.items:
            raise ValueError("held_out_fits needs the observations the fit was made on")
        em = LatentEm(data, fit.classes, fit.base_rate, fit.family)
        start, _ = em.estep(*em.mstep(fit.responsibilities))
        r, loglik, steps, converged = em.run(start)
        out.append(_latent(data, em, r, loglik, steps, converged))
    return out
