"""The dynamics' one EM, on the arrays it runs over: a run's turns per item and context with each item's label and
weight (`LatentData`), the items with the same debate as one row (`_Rows`), and the steps over (label, class)
clusters in the coordinates the acceleration moves in (`LatentEm`). experiments.dynamics.latent starts it and
reads its result; experiments.dynamics.em runs it to convergence."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import numpy as np

from experiments.dynamics.em import MAX_EVALUATIONS, run_em
from experiments.dynamics.family import FamilyName, family_of
from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["LatentData", "LatentEm"]

_TINY = 1e-300
"""Logs of rates and weights are taken at least at this (a rate of exactly 0 times no turn adds nothing)."""
_GRADIENT = 1e-7
"""The quasi-Newton search stops when no gradient component exceeds this times the number of claims (a rate off its
maximum by about this much per claim's turn)."""
_SETTLED = 1e-11
"""EM ends when a plain step moves no claim's responsibility by this much (`LatentEm._settle`)."""
_LOGIT = 27.6
"""Logits are carried within +-_LOGIT between EM steps (rates within 1e-12 of 0 and 1: finite for the
acceleration)."""


class LatentData:
    """The turns by item and context (role, state, shown), each item's label where it has one, and its weight."""

    def __init__(self, seen: Sequence[Observation], weights: Mapping[str, float] | None = None) -> None:
        """`weights`: how many claims each item counts as (a labelled pseudo-item of an unlabelled claim: P(its
        label); None: 1 each)."""
        self.items = list(dict.fromkeys(o.item for o in seen))
        where = {item: i for i, item in enumerate(self.items)}
        self.weight = np.array([1.0 if weights is None else weights[item] for item in self.items], dtype=np.float64)
        """Per item, the claims it counts as in every count and in the log-likelihood (weight k: k copies)."""
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

    def scaled(self, scale: Floats) -> LatentData:
        """The same turns with each item's weight times `scale` (a bootstrap replicate's multiplicities)."""
        out = copy.copy(self)
        out.weight = np.asarray(self.weight * scale, dtype=np.float64)
        return out

    def majority(self) -> Floats:
        """P(factual) per item from its share of "true" verdicts (the agents right more often than wrong), or its
        label."""
        share = np.clip(self.true.sum(1) / np.maximum(self.turns.sum(1), 1), 0.05, 0.95)
        return np.asarray(np.where(self.known >= 0, self.known, share), dtype=np.float64)


class _Rows:
    """The items with the same label (or none) and the same turns per context as one row, weighted by their total:
    they have the same responsibilities at every step, and a run has several times fewer distinct debates than
    claims, so EM's every step is over the rows."""

    def __init__(self, data: LatentData) -> None:
        keys = np.concatenate([data.known[:, None], data.true, data.turns], 1)
        _, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        self.group = np.asarray(group).reshape(-1)
        """Per item, its row."""
        self.true, self.turns, self.mask = data.true[first], data.turns[first], data.mask[first]
        self.false = self.turns - self.true
        self.weight = np.bincount(self.group, weights=data.weight, minlength=len(first)).astype(np.float64)
        self._item_weight = data.weight
        self._members = np.bincount(self.group, minlength=len(first)).astype(np.float64)

    def down(self, r: Floats) -> Floats:
        """Per row, its items' responsibilities `r` averaged by their weights (plainly where they weigh 0): the
        row's weight times this is their weighted sum, so every count is the items' own."""
        weighted = np.zeros((len(self.weight), *r.shape[1:]))
        plain = np.zeros_like(weighted)
        np.add.at(weighted, self.group, r * self._item_weight[:, None, None])
        np.add.at(plain, self.group, r)
        some = self.weight > 0
        weighted[some] /= self.weight[some][:, None, None]
        weighted[~some] = plain[~some] / self._members[~some][:, None, None]
        return weighted


class LatentEm:
    """EM over (label, class) clusters of `data`, in the unconstrained coordinates the acceleration moves in:
    the family's parameters (logits) and the cluster weights' logs (a stated base rate fixes each label's total
    weight). Its methods take and give responsibilities per item (item x label x class); its steps run over
    `_Rows`."""

    def __init__(self, data: LatentData, classes: int, base_rate: float | None, family: FamilyName = "tables") -> None:
        self.data, self.classes, self.base_rate = data, classes, base_rate
        self.contexts = data.true.shape[1]
        self.family = family_of(family, data.keys)
        self.size = self.family.size(classes)
        self._rows = _Rows(data)

    def counted(self, r: Floats) -> tuple[Floats, Floats]:
        """Weighted "true" verdicts and turns per label x class x context."""
        return self._counted(self._rows.down(r))

    def _counted(self, rows: Floats) -> tuple[Floats, Floats]:
        # matrix products (BLAS) rather than einsum: EM's every step is these two and the E step's two
        flat = (rows * self._rows.weight[:, None, None]).reshape(len(rows), -1).T
        shape = (2, self.classes, self.contexts)
        return (flat @ self._rows.true).reshape(shape), (flat @ self._rows.turns).reshape(shape)

    def mstep(self, r: Floats, current: Floats | None = None) -> tuple[Floats, Floats]:
        """The family's parameters (from `current`) and cluster weights (label x class), by maximum likelihood."""
        return self._mstep(self._rows.down(r), current)

    def _mstep(self, rows: Floats, current: Floats | None = None) -> tuple[Floats, Floats]:
        x = self.family.refit(*self._counted(rows), current)
        mass = self._mass(rows)
        if self.base_rate is None:
            return x, mass / mass.sum()
        within = mass / np.maximum(mass.sum(1, keepdims=True), _TINY)
        rate = np.array([[1 - self.base_rate], [self.base_rate]])
        return x, within * rate

    def mass(self, r: Floats) -> Floats:
        """The weighted responsibilities per cluster (label x class)."""
        return np.asarray((r * self.data.weight[:, None, None]).sum(0), dtype=np.float64)

    def _mass(self, rows: Floats) -> Floats:
        return np.asarray((rows * self._rows.weight[:, None, None]).sum(0), dtype=np.float64)

    def joint(self, x: Floats, weights: Floats, true: Floats, false: Floats) -> Floats:
        """Per row of `true`/`false` (verdicts per context) and cluster: log P(those turns, cluster)."""
        p = self.family.rates(x, self.classes)
        said_true = np.log(np.maximum(p, _TINY)).reshape(-1, self.contexts).T
        said_false = np.log(np.maximum(1 - p, _TINY)).reshape(-1, self.contexts).T
        log = (true @ said_true + false @ said_false).reshape(len(true), 2, self.classes)
        return np.asarray(log + np.log(np.maximum(weights, _TINY))[None], dtype=np.float64)

    def estep(self, x: Floats, weights: Floats) -> tuple[Floats, float]:
        """Per item, P(cluster | its turns) at `x` and `weights`; and the log-likelihood."""
        rows, loglik = self._estep(x, weights)
        return rows[self._rows.group], loglik

    def _estep(self, x: Floats, weights: Floats) -> tuple[Floats, float]:
        rows = self._rows
        log = self.joint(x, weights, rows.true, rows.false) + rows.mask[:, :, None]
        top = log.max((1, 2), keepdims=True)
        e = np.exp(log - top)
        total = e.sum((1, 2), keepdims=True)
        return e / total, float((rows.weight * (top + np.log(total)).reshape(-1)).sum())

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
        rows, loglik = self._estep(x, weights)
        return self.pack(*self._mstep(rows, x)), loglik

    def loss(self, v: Floats) -> tuple[float, Floats]:
        """Minus the log-likelihood at `v` and its gradient (Fisher's identity: the E step's expected counts)."""
        x, weights = self.unpack(v)
        rows, loglik = self._estep(x, weights)
        mass = self._mass(rows)
        if self.base_rate is None:
            pulled = mass - mass.sum() * weights
        else:
            pulled = mass - mass.sum(1, keepdims=True) * weights / weights.sum(1, keepdims=True)
        return -loglik, -np.concatenate([self.family.gradient(*self._counted(rows), x), pulled.ravel()])

    def run(self, r: Floats, *, settle: bool = True) -> tuple[Floats, float, int, bool]:
        """EM from responsibilities `r` to convergence: the responsibilities there, the log-likelihood, the steps
        taken and whether it converged. Where EM reaches the family's cap first, a quasi-Newton search (L-BFGS-B on
        the same likelihood and its gradient) goes on from there. `settle`: then on until the responsibilities are
        EM's fixed point (`_settle`; off for a fit nothing stores, a bootstrap replicate)."""
        claims = float(self.data.weight.sum())
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
        rows, loglik = self._estep(*self.unpack(point))
        if not settle:
            return rows[self._rows.group], loglik, steps, converged
        rows, loglik, more, settled = self._settle(rows, loglik, point[: self.size])
        return rows[self._rows.group], loglik, steps + more, converged and settled

    def _settle(self, rows: Floats, loglik: float, x: Floats) -> tuple[Floats, float, int, bool]:
        """Plain EM steps from the converged point until a step moves no responsibility by `_SETTLED`: what a fit
        stores (counts, shares, prior) is then the M step of responsibilities its own tables give back, so a
        calibration file's posterior is EM's (a stop on the likelihood alone leaves them a step apart, 1e-8 on a
        claim). False: `MAX_EVALUATIONS` steps came first (the plain step's rate near 1, where the search ended)."""
        for step in range(1, MAX_EVALUATIONS + 1):
            x, weights = self._mstep(rows, x)
            after, loglik = self._estep(x, weights)
            moved = float(np.abs(after - rows).max(initial=0.0))
            rows = after
            if moved < _SETTLED:
                return rows, loglik, step, True
        return rows, loglik, MAX_EVALUATIONS, False
