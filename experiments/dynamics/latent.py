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

from experiments.dynamics.em import MAX_EVALUATIONS, run_em
from experiments.dynamics.family import FamilyName, Pulled, PulledRates, family_of
from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["LatentData", "LatentEm", "LatentFit", "fit_latent", "held_out_fits"]

_TINY = 1e-300
"""Logs of rates and weights are taken at least at this (a rate of exactly 0 times no turn adds nothing)."""
_GRADIENT = 1e-7
"""The quasi-Newton search stops when no gradient component exceeds this times the number of claims (a rate off its
maximum by about this much per claim's turn)."""
_LOGIT = 27.6
"""Logits are carried within +-_LOGIT between EM steps (rates within 1e-12 of 0 and 1: finite for the
acceleration)."""


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


class LatentData:
    """The turns by item and context (role, state, shown), and each item's label where it has one."""

    def __init__(self, seen: Sequence[Observation]) -> None:
        self.items = list(dict.fromkeys(o.item for o in seen))
        where = {item: i for i, item in enumerate(self.items)}
        known = np.full(len(self.items), -1)
        for o in seen:
            if o.label is not None:
                known[where[o.item]] = int(o.label)
        self.known = known
        """Per item: 1 factual, 0 hallucinated, -1 not labelled."""
        # the E step's log-weight of each label per item: a labelled item's other label is impossible
        self.mask = np.where((known[:, None] < 0) | (known[:, None] == np.arange(2)[None, :]), 0.0, -np.inf)
        contexts: dict[tuple[str, str, tuple[bool, ...]], int] = {}
        column = [contexts.setdefault((o.role, o.state, o.shown), len(contexts)) for o in seen]
        self.keys = list(contexts)
        """Each column's context: role, state, verdicts shown."""
        row = [where[o.item] for o in seen]
        self.true = np.zeros((len(self.items), len(contexts)))
        self.turns = np.zeros((len(self.items), len(contexts)))
        np.add.at(self.true, (row, column), [float(o.verdict) for o in seen])
        np.add.at(self.turns, (row, column), 1.0)
        self.false = self.turns - self.true

    def majority(self) -> Floats:
        """P(factual) per item from its share of "true" verdicts (the agents right more often than wrong), or its
        label."""
        share = np.clip(self.true.sum(1) / np.maximum(self.turns.sum(1), 1), 0.05, 0.95)
        return np.asarray(np.where(self.known >= 0, self.known, share), dtype=np.float64)


class LatentEm:
    """EM over (label, class) clusters of `data`, in the unconstrained coordinates the acceleration moves in:
    the family's parameters (logits) and the cluster weights' logs (a stated base rate fixes each label's total
    weight)."""

    def __init__(self, data: LatentData, classes: int, base_rate: float | None, family: FamilyName = "tables") -> None:
        self.data, self.classes, self.base_rate = data, classes, base_rate
        self.contexts = data.true.shape[1]
        self.family = family_of(family, data.keys)
        self.size = self.family.size(classes)

    def counted(self, r: Floats) -> tuple[Floats, Floats]:
        """Weighted "true" verdicts and turns per label x class x context."""
        # matrix products (BLAS) rather than einsum: EM's every step is these two and the E step's two
        flat = r.reshape(len(self.data.items), -1).T
        shape = (2, self.classes, self.contexts)
        return (flat @ self.data.true).reshape(shape), (flat @ self.data.turns).reshape(shape)

    def mstep(self, r: Floats, current: Floats | None = None) -> tuple[Floats, Floats]:
        """The family's parameters (from `current`) and cluster weights (label x class), by maximum likelihood."""
        x = self.family.refit(*self.counted(r), current)
        mass = r.sum(0)
        if self.base_rate is None:
            return x, mass / mass.sum()
        within = mass / np.maximum(mass.sum(1, keepdims=True), _TINY)
        rate = np.array([[1 - self.base_rate], [self.base_rate]])
        return x, within * rate

    def joint(self, x: Floats, weights: Floats, true: Floats, false: Floats) -> Floats:
        """Per row of `true`/`false` (verdicts per context) and cluster: log P(those turns, cluster)."""
        p = self.family.rates(x, self.classes)
        said_true = np.log(np.maximum(p, _TINY)).reshape(-1, self.contexts).T
        said_false = np.log(np.maximum(1 - p, _TINY)).reshape(-1, self.contexts).T
        log = (true @ said_true + false @ said_false).reshape(len(true), 2, self.classes)
        return np.asarray(log + np.log(np.maximum(weights, _TINY))[None], dtype=np.float64)

    def estep(self, x: Floats, weights: Floats) -> tuple[Floats, float]:
        data = self.data
        log = self.joint(x, weights, data.true, data.false) + data.mask[:, :, None]
        flat = log.reshape(len(data.items), -1)
        top = flat.max(1, keepdims=True)
        total = top[:, 0] + np.log(np.exp(flat - top).sum(1))
        return np.exp(log - total[:, None, None]), float(total.sum())

    def pack(self, x: Floats, weights: Floats) -> Floats:
        return np.concatenate([np.clip(x, -_LOGIT, _LOGIT), np.log(np.maximum(weights, _TINY)).ravel()])

    def unpack(self, v: Floats) -> tuple[Floats, Floats]:
        x = v[: self.size]
        logs = v[self.size :].reshape(2, self.classes)
        if self.base_rate is None:
            flat = np.exp(logs - logs.max())
            return x, flat / flat.sum()
        within = np.exp(logs - logs.max(1, keepdims=True))
        within /= within.sum(1, keepdims=True)
        return x, within * np.array([[1 - self.base_rate], [self.base_rate]])

    def natural(self, v: Floats) -> Floats:
        """The rates and weights themselves (the stop measures a step on their scale)."""
        x, weights = self.unpack(v)
        return np.concatenate([1 / (1 + np.exp(-np.clip(x, -700, 700))), weights.ravel()])

    def step(self, v: Floats) -> tuple[Floats, float]:
        x, weights = self.unpack(v)
        r, loglik = self.estep(x, weights)
        return self.pack(*self.mstep(r, x)), loglik

    def loss(self, v: Floats) -> tuple[float, Floats]:
        """Minus the log-likelihood at `v` and its gradient (Fisher's identity: the E step's expected counts)."""
        x, weights = self.unpack(v)
        r, loglik = self.estep(x, weights)
        mass = r.sum(0)
        if self.base_rate is None:
            pulled = mass - mass.sum() * weights
        else:
            pulled = mass - mass.sum(1, keepdims=True) * weights / weights.sum(1, keepdims=True)
        return -loglik, -np.concatenate([self.family.gradient(*self.counted(r), x), pulled.ravel()])

    def run(self, r: Floats) -> tuple[Floats, float, int, bool]:
        """EM from responsibilities `r` to convergence: the responsibilities there, the log-likelihood, the steps
        taken and whether it converged. Where EM reaches the family's cap first, a quasi-Newton search (L-BFGS-B on
        the same likelihood and its gradient) goes on from there."""
        claims = len(self.data.items)
        done = run_em(self.step, self.pack(*self.mstep(r)), claims, natural=self.natural, cap=self.family.em_cap)
        point, steps, converged = done.point, done.steps, done.converged
        if not converged:
            from scipy.optimize import minimize  # the experiments extra

            bounds = [(-_LOGIT, _LOGIT)] * self.size + [(None, None)] * (len(point) - self.size)
            found = minimize(
                self.loss,
                point,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={
                    "maxiter": MAX_EVALUATIONS,
                    "maxfun": MAX_EVALUATIONS,
                    "ftol": 0.0,
                    "gtol": _GRADIENT * claims,
                },
            )
            point, steps = found.x, steps + int(found.nfev)
            converged = float(np.abs(self.loss(point)[1][: self.size]).max(initial=0.0)) < _GRADIENT * claims * 10
        x, weights = self.unpack(point)
        r, loglik = self.estep(x, weights)
        return r, loglik, steps, converged


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
        # within each label, items by how decided their debate was: unanimous ones first
        agreement = np.abs(data.true.sum(1) / np.maximum(data.turns.sum(1), 1) - 0.5)
        rank = np.argsort(np.argsort(-agreement + rng.uniform(0, 1e-6, len(data.items))))
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
    weighed by its responsibility)."""
    out = np.empty_like(r)
    turns = data.turns.sum(1)
    for label in (0, 1):
        said = data.true.sum(1) if label else turns - data.true.sum(1)
        weight = r[:, label, :] * turns[:, None]
        accuracy = (r[:, label, :] * said[:, None]).sum(0) / np.maximum(weight.sum(0), 1e-12)
        out[:, label, :] = r[:, label, np.argsort(-accuracy)]
    return out


def _oriented(data: LatentData, r: Floats) -> Floats:
    """The one-class fit as the assumption has it: the factual cluster is the one whose turns say "true" more often
    (EM from the majority start lands there; this makes it so whatever the start). Labels orient a fit themselves."""
    if r.shape[2] != 1 or (data.known >= 0).any():
        return r
    said = data.true.sum(1) / np.maximum(data.turns.sum(1), 1)
    factual_says_true = (r[:, 1, 0] * said).sum() / max(r[:, 1, 0].sum(), 1e-12)
    hallucinated_says_true = (r[:, 0, 0] * said).sum() / max(r[:, 0, 0].sum(), 1e-12)
    return r if factual_says_true >= hallucinated_says_true else r[:, ::-1, :]


def fit_latent(
    seen: Sequence[Observation],
    classes: int,
    *,
    seed: int = 0,
    base_rate: float | None = None,
    family: FamilyName = "tables",
) -> LatentFit:
    """EM over (label, class) clusters to convergence, each labelled claim fixed to its label and every other label
    taken as unknown: the best of a start split by agreement, a random one and one whose last class is the mirror
    image, each from the majority verdict (a labelled claim's own label). `base_rate`: the share of factual claims,
    stated and held fixed (None: fitted by maximum likelihood). `family`: how each cluster's rates are tied
    (experiments.dynamics.family)."""
    data = LatentData(seen)
    em = LatentEm(data, classes, base_rate, family)
    rng = np.random.default_rng(seed)
    best: tuple[float, Floats, int, bool] | None = None
    starts = [_start(data, classes, rng, True)]
    if classes > 1:
        starts += [_start(data, classes, rng, False), _start(data, classes, rng, False, mirrored=True)]
    for start in starts:
        r, loglik, steps, converged = em.run(start)
        if best is None or loglik > best[0]:
            best = (loglik, r, steps, converged)
    assert best is not None
    loglik, r, steps, converged = best
    oriented = _oriented(data, _ordered(data, r))
    if base_rate is not None and oriented[:, 1].sum() != r[:, 1].sum():
        # with the share held fixed the mirror image is no longer as likely: fit the oriented one under it
        oriented, loglik, more, converged = em.run(oriented)
        steps += more
    return _latent(data, em, _oriented(data, _ordered(data, oriented)), loglik, steps, converged)


def _latent(data: LatentData, em: LatentEm, r: Floats, loglik: float, steps: int, converged: bool) -> LatentFit:
    x, weights = em.mstep(r)
    free = 2 * em.classes - 1 - (1 if em.base_rate is not None else 0)
    labelled = data.known >= 0
    family = em.family
    return LatentFit(
        items=data.items,
        responsibilities=r,
        prior=float(weights[1].sum() / weights.sum()),
        shares={bool(label): (weights[label] / weights[label].sum()).tolist() for label in (0, 1)},
        loglik=loglik,
        parameters=family.parameters(em.classes) + free,
        steps=steps,
        converged=converged,
        base_rate=em.base_rate,
        labelled=r[labelled].sum(0),
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
