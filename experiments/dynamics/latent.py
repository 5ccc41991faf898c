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

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["LatentFit", "expand", "fit_latent"]

PSEUDO = 0.5
"""Pseudo-counts per context and cluster, so an empty cell is not a certainty."""
_TOLERANCE = 1e-7


@dataclass(frozen=True)
class LatentFit:
    """The fitted clusters of a partly or wholly unlabelled run."""

    items: list[str]
    responsibilities: Floats
    """item x label (0 hallucinated, 1 factual) x class: P(cluster | the item's turns)."""
    prior: float
    """The fitted share of factual claims."""
    shares: dict[bool, list[float]]
    """Per label, the share of its items in each class (easiest first)."""
    loglik: float
    parameters: int

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

    def majority(self) -> Floats:
        """P(factual) per item from its share of "true" verdicts: the agents right more often than wrong."""
        share = self.true.sum(1) / np.maximum(self.turns.sum(1), 1)
        return np.asarray(np.clip(share, 0.05, 0.95), dtype=np.float64)


def _mstep(data: _Data, r: Floats) -> tuple[Floats, Floats]:
    """Rates (label x class x context) and cluster weights (label x class)."""
    counted_true = np.einsum("ilc,ik->lck", r, data.true)
    counted = np.einsum("ilc,ik->lck", r, data.turns)
    p = (counted_true + PSEUDO) / (counted + 2 * PSEUDO)
    weights = r.sum(0) + 1e-9
    return p, weights / weights.sum()


def _estep(data: _Data, p: Floats, weights: Floats) -> tuple[Floats, float]:
    log = (
        np.einsum("ik,lck->ilc", data.true, np.log(p))
        + np.einsum("ik,lck->ilc", data.turns - data.true, np.log1p(-p))
        + np.log(weights)[None]
    )
    flat = log.reshape(len(data.items), -1)
    top = flat.max(1, keepdims=True)
    total = top[:, 0] + np.log(np.exp(flat - top).sum(1))
    return np.exp(log - total[:, None, None]), float(total.sum())


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


def _run(data: _Data, r: Floats, iterations: int) -> tuple[Floats, float]:
    before = -np.inf
    loglik = before
    for _ in range(iterations):
        p, weights = _mstep(data, r)
        r, loglik = _estep(data, p, weights)
        if loglik - before < _TOLERANCE * abs(loglik):
            break
        before = loglik
    return r, loglik


def _ordered(data: _Data, r: Floats) -> Floats:
    """Each label's classes easiest first (the share of their turns that are right for that label)."""
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


def fit_latent(seen: Sequence[Observation], classes: int, *, seed: int = 0, iterations: int = 500) -> LatentFit:
    """EM over (label, class) clusters, every label taken as unknown: the best of a start split by agreement, a
    random one and one whose last class is the mirror image, each from the majority verdict."""
    data = _Data(seen)
    rng = np.random.default_rng(seed)
    best: tuple[float, Floats] | None = None
    starts = [_start(data, classes, rng, True)]
    if classes > 1:
        starts += [_start(data, classes, rng, False), _start(data, classes, rng, False, mirrored=True)]
    for start in starts:
        r, loglik = _run(data, start, iterations)
        if best is None or loglik > best[0]:
            best = (loglik, r)
    assert best is not None
    r = _oriented(data, _ordered(data, best[1]))
    _, weights = _mstep(data, r)
    prior = float(weights[1].sum() / weights.sum())
    return LatentFit(
        items=data.items,
        responsibilities=r,
        prior=prior,
        shares={bool(label): (weights[label] / weights[label].sum()).tolist() for label in (0, 1)},
        loglik=best[0],
        parameters=2 * classes * data.true.shape[1] + 2 * classes - 1,
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
