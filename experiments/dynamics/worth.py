"""The labels worth asking for: which unlabelled claims of a latent fit (experiments.dynamics.latent) would most
narrow what the calibration does not know, and how many would settle it.

What a fit does not know is its parameters' uncertainty, and what a user feels of it is the uncertainty of the
p_factual it gives: the sum over the unlabelled claims of Var(p_factual), through the observed information (the
claims' scores' outer products, at the fit). A claim's missing label is missing information (Louis 1982): labelling
claim i adds to the information v_i d_i d_i', where v_i = p_i (1 - p_i) and d_i is the difference of its scores
given each label. The expected fall of the summed variance follows in closed form (Sherman-Morrison), and the
information is updated after each claim taken, so a batch does not ask the same thing twice (claims with the same
turns are one candidate, taken as often as it has claims).

The claims are not taken by that gain alone: the j-th is the most informative claim near the j-th point of a van
der Corput sequence over the claims' ranks by p_factual, so any first k of the order are spread over p_factual as
the claims are. Taken by gain alone, labels pile onto a few kinds of turns, and where the fitted family is not the
population's (fewer classes than the items have) a fit to such labels is worse than a fit to as many random ones
(docs/dynamics.md, "The labels worth asking for").

This is a local measure: it cannot see a class whose verdicts are all wrong, which looks, unlabelled, like claims of
the other label. Those are found by the labels that come first (a spread over p_factual) and by the most typical
claims of each class no label reaches (experiments.dynamics.clusters), which head the order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from experiments.dynamics.latent import LatentFit
from experiments.dynamics.latent_em import LatentData, LatentEm
from experiments.dynamics.model import Floats
from experiments.dynamics.observe import Observation

__all__ = ["ASKED", "FOLLOWED", "LABEL_ORDERS", "PRIOR", "TARGET_ERROR", "LabelOrder", "Worth", "worth"]

LabelOrder = Literal["random", "variance"]
"""How the order of the labels worth asking for goes on past its first two parts (a spread while labels are few, the
classes no label reaches): a seeded random sample (the default: it measures the calibration whatever the fitted
family, and did better than the variance order in docs/dynamics.md's table), or by the expected fall of p_factual's
variance (this module)."""
LABEL_ORDERS: tuple[LabelOrder, ...] = ("random", "variance")

TARGET_ERROR = 0.025
"""The root-mean-square standard error of p_factual over the unlabelled claims that settles a calibration: half
the ECE (0.05) the issue asks of a fit, since a parameter's error moves the claims of a bin together."""
ASKED = 200
"""Claims the order lists at most (the labels a team asks for in one round; a fit after them says the next)."""
FOLLOWED = 2000
"""Claims the order is followed for at most when counting the labels needed (each step costs patterns x
parameters)."""
PRIOR = 1.0
"""The precision added to every parameter's information (a Gaussian prior worth about one claim on each logit and
log weight): a direction the claims leave unidentified has a bounded variance, not an infinite one, and each label's
update of the inverse stays exact."""
_STEP = 1e-4
"""The central difference's step in the packed parameters (logits and log weights)."""


@dataclass(frozen=True)
class Worth:
    """The greedy order of the unlabelled claims by the expected fall of p_factual's summed variance."""

    claims: list[str]
    gains: list[float]
    """Per claim in `claims`, the share of the summed variance its label is expected to remove, at its turn."""
    p_factual: list[float]
    """Per claim, its p_factual under the fit."""
    error: float
    """The root-mean-square standard error of p_factual over the unlabelled claims now."""
    needed: int | None
    """Labels in this order that bring `error` to `TARGET_ERROR` (0: there already; None: not within `followed`)."""
    followed: int
    """Claims the order was followed for (every unlabelled claim, at most `FOLLOWED`)."""


def _label_logs(em: LatentEm, v: Floats, true: Floats, false: Floats) -> Floats:
    """Per pattern (rows of `true`, `false`) and label: log P(turns, label) under the packed parameters `v`."""
    joint = em.joint(*em.unpack(v), true, false)
    return np.asarray(np.logaddexp.reduce(joint, axis=2), dtype=np.float64)


def _scores(em: LatentEm, v: Floats, true: Floats, false: Floats) -> tuple[Floats, Floats]:
    """Per pattern: its log P(turns, label) (pattern x label) and their gradients (pattern x label x parameter),
    by central differences."""
    base = _label_logs(em, v, true, false)
    gradient = np.empty((*base.shape, len(v)))
    for k in range(len(v)):
        up, down = v.copy(), v.copy()
        up[k] += _STEP
        down[k] -= _STEP
        gradient[:, :, k] = (_label_logs(em, up, true, false) - _label_logs(em, down, true, false)) / (2 * _STEP)
    return base, gradient


@dataclass
class _Greedy:
    """The state of the greedy order over patterns: per pattern u = I^-1 d, w = M u, q = u'M u and r = d'u, where I
    is the information and M the summed outer products of p_factual's gradients over the unlabelled claims."""

    d: Floats
    v: Floats
    u: Floats
    w: Floats
    r: Floats
    left: Floats
    total: float

    def gains(self) -> Floats:
        q = (self.w * self.u).sum(1)
        return np.asarray(
            np.where(self.left > 0, self.v * q / (1 + self.v * np.maximum(self.r, 0.0)), -np.inf), dtype=np.float64
        )

    def take(self, among: Floats | None = None) -> tuple[int, float]:
        """The pattern (of `among`, else of all) whose label removes most of the summed variance, and how much; the
        information updated (Sherman-Morrison) as if its label were known."""
        gain = self.gains()
        if among is not None:
            kept = np.full_like(gain, -np.inf)
            kept[among] = gain[among]
            gain = kept
        k = int(np.argmax(gain))
        c = self.v[k] / (1 + self.v[k] * max(float(self.r[k]), 0.0))
        a = self.d @ self.u[k]
        top, w_top = self.u[k].copy(), self.w[k].copy()
        self.u -= c * np.outer(a, top)
        self.w -= c * np.outer(a, w_top)
        self.r = self.r - c * a**2
        self.total -= float(gain[k])
        self.left[k] -= 1
        return k, float(gain[k])


def _greedy(seen: Sequence[Observation], fit: LatentFit) -> tuple[LatentData, _Greedy, np.ndarray, Floats]:
    """The fit's information and the greedy order's start; the data, the pattern of each claim and each
    pattern's p_factual."""
    data = LatentData(seen)
    if data.items != fit.items:
        raise ValueError("worth needs the observations the fit was made on")
    em = LatentEm(data, fit.classes, fit.base_rate, fit.family)
    v = em.pack(*em.mstep(fit.responsibilities))
    patterns, pattern_of = np.unique(np.concatenate([data.true, data.turns], axis=1), axis=0, return_inverse=True)
    pattern_of = pattern_of.ravel()
    true, turns = patterns[:, : em.contexts], patterns[:, em.contexts :]
    logs, gradient = _scores(em, v, true, turns - true)
    p = 1 / (1 + np.exp(np.clip(logs[:, 0] - logs[:, 1], -700, 700)))
    d = gradient[:, 1] - gradient[:, 0]
    # each claim's score: given its label where it has one, else averaged over the labels by p
    known = data.known
    mixed = p[:, None] * gradient[:, 1] + (1 - p[:, None]) * gradient[:, 0]
    per_claim = np.where(known[:, None] >= 0, gradient[pattern_of, np.maximum(known, 0)], mixed[pattern_of])
    information = per_claim.T @ per_claim + PRIOR * np.eye(len(v))
    inverse = np.linalg.inv(information)
    left = np.bincount(pattern_of[known < 0], minlength=len(patterns)).astype(np.float64)
    v_p = p * (1 - p)
    jacobian = v_p[:, None] * d
    spread = (jacobian * left[:, None]).T @ jacobian
    u = d @ inverse
    state = _Greedy(d, v_p, u, u @ spread, (d * u).sum(1), left, float(np.trace(inverse @ spread)))
    return data, state, pattern_of, p


def _corput(j: int) -> tuple[float, float]:
    """The j-th point (from 0) of the base-2 van der Corput sequence, and half the width of its level's cells."""
    at, scale, n = 0.0, 0.5, j + 1
    while n:
        n, bit = divmod(n, 2)
        at += bit * scale
        scale /= 2
    level = int(np.floor(np.log2(j + 1))) + 1
    return at, 0.5 / 2 ** (level - 1)


def worth(
    seen: Sequence[Observation],
    fit: LatentFit,
    asked: int = ASKED,
    followed: int = FOLLOWED,
) -> Worth:
    """The unlabelled claims of `fit` (fitted on `seen`) in the order their labels would most narrow p_factual:
    the first `asked` of them, and how many of that order bring the error to `TARGET_ERROR` (followed for at most
    `followed` claims)."""
    data, state, pattern_of, p = _greedy(seen, fit)
    unlabelled = np.flatnonzero(data.known < 0)
    grouped = unlabelled[np.argsort(pattern_of[unlabelled], kind="stable")]
    bounds = np.cumsum(state.left.astype(int))
    members = {int(k): grouped[bounds[k] - int(state.left[k]) : bounds[k]].tolist() for k in np.flatnonzero(state.left)}
    count = max(len(unlabelled), 1)
    start = max(state.total, 1e-300)

    def error() -> float:
        return float(np.sqrt(max(state.total, 0.0) / count))

    first = error()
    needed: int | None = 0 if first <= TARGET_ERROR else None
    claims: list[int] = []
    gains: list[float] = []
    steps = 0
    # the claims by p_factual: pick j is taken near the j-th point of a van der Corput sequence over their ranks, so
    # any first k picks are spread over p_factual (representative of it) and each is the most informative there
    by_p = unlabelled[np.argsort(p[pattern_of[unlabelled]], kind="stable")]
    rank = np.empty(len(data.items), dtype=int)
    rank[by_p] = np.arange(len(by_p))
    free = np.ones(len(by_p), dtype=bool)
    while steps < followed and state.left.any() and (needed is None or len(claims) < asked):
        at, half = _corput(steps)
        lo, hi = int((at - half) * len(by_p)), int(np.ceil((at + half) * len(by_p)))
        window = by_p[max(lo, 0) : hi][free[max(lo, 0) : hi]]
        k, gain = state.take(np.unique(pattern_of[window]) if len(window) else None)
        claim = members[k][len(members[k]) - 1 - int(state.left[k])]
        free[rank[claim]] = False
        steps += 1
        if len(claims) < asked:
            claims.append(claim)
            gains.append(gain / start)
        if needed is None and error() <= TARGET_ERROR:
            needed = steps
    return Worth(
        claims=[data.items[c] for c in claims],
        gains=gains,
        p_factual=[float(p[pattern_of[c]]) for c in claims],
        error=first,
        needed=needed,
        followed=steps,
    )
