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

So the fit never reads the labels a run has: they are held out, to test the fitted p_factual and correct it
(experiments.dynamics.labelled), which an in-sample fit would flatter. The fitted clusters become pseudo-items
(`expand`): an unlabelled item is counted as factual with weight P(factual | its turns) and as hallucinated with the
rest, so every other part of the dynamics (the tables, the calibration file, the predictions, the checks) reads a
weighted labelled run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from experiments.dynamics.em import run_em
from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["CHI2_95", "LatentFit", "ShareInterval", "expand", "fit_latent", "share_interval"]

_TINY = 1e-300
"""Logs of rates and weights are taken at least at this (a rate of exactly 0 times no turn adds nothing)."""
_CLIP = 1e-12
"""Rates are carried within [_CLIP, 1 - _CLIP] between EM steps (their logits stay finite for the acceleration)."""


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

    @property
    def classes(self) -> int:
        return int(self.responsibilities.shape[2])

    def bic(self) -> float:
        return -2 * self.loglik + self.parameters * float(np.log(max(2, len(self.items))))


class _Data:
    """The turns by item and context (role, state, shown): no label anywhere."""

    def __init__(self, seen: Sequence[Observation]) -> None:
        self.items = list(dict.fromkeys(o.item for o in seen))
        where = {item: i for i, item in enumerate(self.items)}
        contexts: dict[tuple[str, str, tuple[bool, ...]], int] = {}
        column = [contexts.setdefault((o.role, o.state, o.shown), len(contexts)) for o in seen]
        row = [where[o.item] for o in seen]
        self.true = np.zeros((len(self.items), len(contexts)))
        self.turns = np.zeros((len(self.items), len(contexts)))
        np.add.at(self.true, (row, column), [float(o.verdict) for o in seen])
        np.add.at(self.turns, (row, column), 1.0)
        self.false = self.turns - self.true

    def majority(self) -> Floats:
        """P(factual) per item from its share of "true" verdicts: the agents right more often than wrong."""
        share = self.true.sum(1) / np.maximum(self.turns.sum(1), 1)
        return np.asarray(np.clip(share, 0.05, 0.95), dtype=np.float64)


class _Em:
    """EM over (label, class) clusters of `data`, in the unconstrained coordinates the acceleration moves in:
    the rates' logits and the cluster weights' logs (a stated base rate fixes each label's total weight)."""

    def __init__(self, data: _Data, classes: int, base_rate: float | None) -> None:
        self.data, self.classes, self.base_rate = data, classes, base_rate
        self.contexts = data.true.shape[1]
        self.size = 2 * classes * self.contexts

    def mstep(self, r: Floats) -> tuple[Floats, Floats]:
        """Rates (label x class x context) and cluster weights (label x class), by maximum likelihood."""
        # matrix products (BLAS) rather than einsum: EM's every step is these two and the E step's two
        flat = r.reshape(len(self.data.items), -1).T
        shape = (2, self.classes, self.contexts)
        counted_true = (flat @ self.data.true).reshape(shape)
        counted = (flat @ self.data.turns).reshape(shape)
        p = np.divide(counted_true, counted, out=np.full_like(counted, 0.5), where=counted > 0)
        mass = r.sum(0)
        if self.base_rate is None:
            return p, mass / mass.sum()
        within = mass / np.maximum(mass.sum(1, keepdims=True), _TINY)
        rate = np.array([[1 - self.base_rate], [self.base_rate]])
        return p, within * rate

    def estep(self, p: Floats, weights: Floats) -> tuple[Floats, float]:
        data = self.data
        said_true = np.log(np.maximum(p, _TINY)).reshape(-1, self.contexts).T
        said_false = np.log(np.maximum(1 - p, _TINY)).reshape(-1, self.contexts).T
        log = (data.true @ said_true + data.false @ said_false).reshape(len(data.items), 2, self.classes) + np.log(
            np.maximum(weights, _TINY)
        )[None]
        flat = log.reshape(len(data.items), -1)
        top = flat.max(1, keepdims=True)
        total = top[:, 0] + np.log(np.exp(flat - top).sum(1))
        return np.exp(log - total[:, None, None]), float(total.sum())

    def pack(self, p: Floats, weights: Floats) -> Floats:
        q = np.clip(p, _CLIP, 1 - _CLIP)
        return np.concatenate([np.log(q / (1 - q)).ravel(), np.log(np.maximum(weights, _TINY)).ravel()])

    def unpack(self, x: Floats) -> tuple[Floats, Floats]:
        p = 1 / (1 + np.exp(-np.clip(x[: self.size], -700, 700)))
        logs = x[self.size :].reshape(2, self.classes)
        if self.base_rate is None:
            flat = np.exp(logs - logs.max())
            return p.reshape(2, self.classes, self.contexts), flat / flat.sum()
        within = np.exp(logs - logs.max(1, keepdims=True))
        within /= within.sum(1, keepdims=True)
        return p.reshape(2, self.classes, self.contexts), within * np.array([[1 - self.base_rate], [self.base_rate]])

    def natural(self, x: Floats) -> Floats:
        """The rates and weights themselves (the stop measures a step on their scale)."""
        p, weights = self.unpack(x)
        return np.concatenate([p.ravel(), weights.ravel()])

    def step(self, x: Floats) -> tuple[Floats, float]:
        r, loglik = self.estep(*self.unpack(x))
        return self.pack(*self.mstep(r)), loglik

    def run(self, r: Floats) -> tuple[Floats, float, int, bool]:
        """EM from responsibilities `r` to convergence: the responsibilities there, the log-likelihood, the steps
        taken and whether it converged before the cap."""
        done = run_em(self.step, self.pack(*self.mstep(r)), len(self.data.items), natural=self.natural)
        r, loglik = self.estep(*self.unpack(done.point))
        return r, loglik, done.steps, done.converged


def _start(data: _Data, classes: int, rng: np.random.Generator, split: bool, mirrored: bool = False) -> Floats:
    factual = data.majority()
    if mirrored:
        # the last class starts as the mirror image: its items' majority verdict wrong (the items that fool the
        # agents); EM keeps it only where the turns favour it
        klass = np.full((len(data.items), classes), 1.0 / classes)
        guess = np.stack(
            [np.stack([1 - factual, factual], 1)] * (classes - 1) + [np.stack([factual, 1 - factual], 1)], 2
        )
        r = guess * klass[:, None, :]
        return np.asarray(r / r.sum((1, 2), keepdims=True), dtype=np.float64)
    if split:
        # within each label, items by how decided their debate was: unanimous ones first
        agreement = np.abs(data.true.sum(1) / np.maximum(data.turns.sum(1), 1) - 0.5)
        rank = np.argsort(np.argsort(-agreement + rng.uniform(0, 1e-6, len(data.items))))
        klass = np.full((len(data.items), classes), 0.1 / max(1, classes - 1))
        klass[np.arange(len(data.items)), rank * classes // len(data.items)] = 0.9 if classes > 1 else 1.0
    else:
        klass = rng.dirichlet(np.ones(classes), len(data.items))
    r = np.stack([(1 - factual)[:, None] * klass, factual[:, None] * klass], axis=1)
    return np.asarray(r / r.sum((1, 2), keepdims=True), dtype=np.float64)


def _ordered(data: _Data, r: Floats) -> Floats:
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


def _oriented(data: _Data, r: Floats) -> Floats:
    """The one-class fit as the assumption has it: the factual cluster is the one whose turns say "true" more often
    (EM from the majority start lands there; this makes it so whatever the start)."""
    if r.shape[2] != 1:
        return r
    said = data.true.sum(1) / np.maximum(data.turns.sum(1), 1)
    factual_says_true = (r[:, 1, 0] * said).sum() / max(r[:, 1, 0].sum(), 1e-12)
    hallucinated_says_true = (r[:, 0, 0] * said).sum() / max(r[:, 0, 0].sum(), 1e-12)
    return r if factual_says_true >= hallucinated_says_true else r[:, ::-1, :]


def fit_latent(
    seen: Sequence[Observation], classes: int, *, seed: int = 0, base_rate: float | None = None
) -> LatentFit:
    """EM over (label, class) clusters to convergence, every label taken as unknown: the best of a start split by
    agreement, a random one and one whose last class is the mirror image, each from the majority verdict.
    `base_rate`: the share of factual claims, stated and held fixed (None: fitted by maximum likelihood)."""
    data = _Data(seen)
    em = _Em(data, classes, base_rate)
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
    r = _oriented(data, _ordered(data, oriented))
    _, weights = em.mstep(r)
    prior = float(weights[1].sum() / weights.sum())
    free = 2 * classes - 1 - (1 if base_rate is not None else 0)
    return LatentFit(
        items=data.items,
        responsibilities=r,
        prior=prior,
        shares={bool(label): (weights[label] / weights[label].sum()).tolist() for label in (0, 1)},
        loglik=loglik,
        parameters=2 * classes * data.true.shape[1] + free,
        steps=steps,
        converged=converged,
        base_rate=base_rate,
    )


CHI2_95 = 3.841458820694124
"""The chi-square quantile (1 df) of a 95% profile-likelihood interval."""
_EDGE = 1e-3
"""The interval is searched within [_EDGE, 1 - _EDGE]; reaching an edge reads as reaching 0 or 1."""


@dataclass(frozen=True)
class ShareInterval:
    """What the turns say about the share of factual claims: its 95% profile-likelihood interval."""

    low: float
    high: float
    standard_error: float
    """From the profile's curvature at the estimate (the observed Fisher information)."""
    claims: int
    """The claims it was fitted on (the standard error shrinks as 1 / sqrt(claims))."""


def share_interval(seen: Sequence[Observation], fit: LatentFit) -> ShareInterval:
    """The 95% profile-likelihood interval of the factual share of `fit` (fitted on `seen`): every share whose
    best fit, with the share held there and everything else refitted (EM from the fit's own responsibilities),
    loses less than half the chi-square quantile in log-likelihood."""
    data = _Data(seen)
    if data.items != fit.items:
        raise ValueError("share_interval needs the observations the fit was made on")

    def deviance(share: float) -> float:
        _, loglik, _, _ = _Em(data, fit.classes, share).run(fit.responsibilities)
        return 2 * (fit.loglik - loglik)

    from scipy.optimize import brentq  # the experiments extra

    def side(edge: float) -> float:
        if deviance(edge) < CHI2_95:
            return 0.0 if edge < 0.5 else 1.0
        return float(brentq(lambda x: deviance(x) - CHI2_95, fit.prior, edge, xtol=1e-4))

    h = min(0.005, fit.prior / 2, (1 - fit.prior) / 2)
    curvature = max((deviance(fit.prior + h) + deviance(fit.prior - h)) / 2, 1e-12)
    return ShareInterval(
        low=side(_EDGE),
        high=side(1 - _EDGE),
        standard_error=h / math.sqrt(curvature),
        claims=len(fit.items),
    )


def expand(seen: Sequence[Observation], fit: LatentFit) -> tuple[list[Observation], dict[str, float], dict[str, str]]:
    """The run as labelled pseudo-items: each item twice, as factual and as hallucinated (`item#factual`,
    `item#hallucinated`), each copy weighted by P(that label | its turns) under the fit. Returns the observations,
    each pseudo-item's weight and the item it came from."""
    where = {item: i for i, item in enumerate(fit.items)}
    weight: dict[str, float] = {}
    origin: dict[str, str] = {}
    out: list[Observation] = []
    for o in seen:
        factual = float(fit.responsibilities[where[o.item], 1].sum())
        for label, w in ((True, factual), (False, 1.0 - factual)):
            if w <= 1e-9:
                continue
            name = f"{o.item}#{'factual' if label else 'hallucinated'}"
            weight[name], origin[name] = w, o.item
            out.append(replace(o, item=name, label=label))
    return out, weight, origin
