"""Each role's behaviour as a small parametric model fitted to observed turns.

The model: per role, state, true label and the verdicts it was shown, P(verdict true) (a Bernoulli per context,
its MLE the share of true verdicts). Derived figures per role and label: the flip rate (the verdict differs from
the last opinion shown) and the conformity rate (it repeats the last opinion shown when that opinion is wrong).
Intervals: a percentile bootstrap over items. The Markov check: a likelihood-ratio test of this model against one
that also conditions on the opinion before the ones shown.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.stats import chi2

from experiments.dynamics.observe import Observation

__all__ = [
    "Behaviour",
    "ContextFit",
    "DynamicsFit",
    "MarkovCheck",
    "RoleRates",
    "fit",
    "interval",
    "markov_check",
    "replicates",
]

Context = tuple[str, str, bool, tuple[bool, ...]]
"""(role, state, true label, verdicts shown)."""


class Behaviour:
    """P(verdict true | role, state, label, shown) from counts, with a stated back-off for contexts never seen:
    the same role, label and shown verdicts in any state, then the last shown verdict alone, then the role and label."""

    def __init__(self, seen: Iterable[Observation]) -> None:
        self._counts: dict[tuple[object, ...], list[int]] = defaultdict(lambda: [0, 0])
        for o in seen:
            for key in self._keys(o.role, o.state, o.label, o.shown):
                counts = self._counts[key]
                counts[0] += o.verdict
                counts[1] += 1
        self.backed_off: set[str] = set()
        """Contexts answered by back-off (named for the report)."""

    @staticmethod
    def _keys(role: str, state: str, label: bool, shown: tuple[bool, ...]) -> list[tuple[object, ...]]:
        return [(role, state, label, shown), (role, "*", label, shown), (role, "*", label, shown[-1:]), (role, label)]

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        for depth, key in enumerate(self._keys(role, state, label, shown)):
            true, n = self._counts.get(key, (0, 0))
            if n:
                if depth:
                    self.backed_off.add(f"{role} in {state}, label {label}, shown {list(shown)}")
                return true / n
        self.backed_off.add(f"{role} (never observed): 0.5")
        return 0.5


class ContextFit(BaseModel):
    """P(verdict true) in one context, with its bootstrap interval."""

    model_config = ConfigDict(frozen=True)
    role: str
    state: str
    label: bool
    shown: list[bool]
    n: int
    p_true: float
    low: float
    high: float


class RoleRates(BaseModel):
    """A role's derived figures for one true label."""

    model_config = ConfigDict(frozen=True)
    role: str
    label: bool
    turns: int
    flip: float | None
    """P(verdict != last opinion shown)."""
    flip_interval: tuple[float, float] | None
    conformity: float | None
    """P(verdict = last opinion shown | that opinion is wrong)."""
    conformity_interval: tuple[float, float] | None


class MarkovCheck(BaseModel):
    """Does a turn depend on more than the opinions it is shown? A likelihood-ratio test against the model that
    also conditions on the opinion before them."""

    model_config = ConfigDict(frozen=True)
    statistic: float
    df: int
    p_value: float
    rejected: bool
    """At the 1% level: the turns depend on earlier opinions too, and predictions from this fit are suspect."""


class DynamicsFit(BaseModel):
    """What `debate dynamics fit` reports."""

    model_config = ConfigDict(frozen=True)
    runs: list[str]
    chain: str
    min_rounds: int
    max_rounds: int
    claims: int
    turns: int
    bootstrap: int
    seed: int
    contexts: list[ContextFit]
    roles: list[RoleRates]
    markov: MarkovCheck
    calls_per_turn: float


def _by_item(seen: Sequence[Observation]) -> dict[str, list[Observation]]:
    items: dict[str, list[Observation]] = defaultdict(list)
    for o in seen:
        items[o.item].append(o)
    return items


def replicates(seen: Sequence[Observation], n: int, seed: int) -> list[list[Observation]]:
    """`n` bootstrap replicates: items drawn with replacement, each with all its turns."""
    items, rng = list(_by_item(seen).values()), random.Random(seed)
    return [[o for _ in items for o in rng.choice(items)] for _ in range(n)]


def interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap values."""
    low, high = np.percentile(np.asarray(values, dtype=float), [2.5, 97.5])
    return float(low), float(high)


def _rate(seen: Iterable[Observation], hit: Callable[[Observation], bool]) -> float | None:
    chosen = list(seen)
    return sum(map(hit, chosen)) / len(chosen) if chosen else None


def _rates(seen: Sequence[Observation], role: str, label: bool) -> tuple[float | None, float | None]:
    mine = [o for o in seen if o.role == role and o.label == label and o.shown]
    flip = _rate(mine, lambda o: o.verdict != o.shown[-1])
    conformity = _rate([o for o in mine if o.shown[-1] != label], lambda o: o.verdict == o.shown[-1])
    return flip, conformity


def _loglik(seen: Sequence[Observation], key: Callable[[Observation], tuple[object, ...]]) -> tuple[float, int]:
    counts: dict[tuple[object, ...], list[int]] = defaultdict(lambda: [0, 0])
    for o in seen:
        counts[key(o)][0] += o.verdict
        counts[key(o)][1] += 1
    total = 0.0
    for true, n in counts.values():
        for k in (true, n - true):
            total += k * math.log(k / n) if k else 0.0
    return total, len(counts)


def markov_check(seen: Sequence[Observation]) -> MarkovCheck:
    """Likelihood-ratio test: turns that were shown something, by (role, state, label, shown) vs. the same plus the
    opinion before those shown. df: the extra contexts the richer model has."""
    debated = [o for o in seen if o.shown and o.earlier is not None]
    small, small_k = _loglik(debated, lambda o: (o.role, o.state, o.label, o.shown))
    large, large_k = _loglik(debated, lambda o: (o.role, o.state, o.label, o.shown, o.earlier))
    statistic, df = max(0.0, 2 * (large - small)), large_k - small_k
    p_value = float(chi2.sf(statistic, df)) if df else 1.0
    return MarkovCheck(statistic=statistic, df=df, p_value=p_value, rejected=p_value < 0.01)


def _contexts(seen: Sequence[Observation]) -> dict[Context, tuple[int, float]]:
    counts: dict[Context, list[int]] = defaultdict(lambda: [0, 0])
    for o in seen:
        counts[(o.role, o.state, o.label, o.shown)][0] += o.verdict
        counts[(o.role, o.state, o.label, o.shown)][1] += 1
    return {k: (n, true / n) for k, (true, n) in counts.items()}


def fit(seen: Sequence[Observation], *, runs: list[str], chain: str, min_rounds: int, max_rounds: int,
        bootstrap: int = 200, seed: int = 0) -> DynamicsFit:  # fmt: skip
    """The fitted behaviour of every role, with bootstrap intervals over items."""
    point = _contexts(seen)
    roles = sorted({(o.role, o.label) for o in seen}, key=lambda r: (r[0], not r[1]))
    samples: dict[Context, list[float]] = defaultdict(list)
    rate_samples: dict[tuple[str, bool], list[tuple[float | None, float | None]]] = defaultdict(list)
    for replicate in replicates(seen, bootstrap, seed):
        for key, (_, p) in _contexts(replicate).items():
            samples[key].append(p)
        for role, label in roles:
            rate_samples[(role, label)].append(_rates(replicate, role, label))
    contexts = []
    for k, (n, p) in sorted(point.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2], kv[0][3])):
        low, high = interval(samples[k] or [p])
        contexts.append(ContextFit(role=k[0], state=k[1], label=k[2], shown=list(k[3]), n=n, p_true=p, low=low,
                                   high=high))  # fmt: skip
    rates = []
    for role, label in roles:
        flip, conformity = _rates(seen, role, label)
        flips = [f for f, _ in rate_samples[(role, label)] if f is not None]
        conforms = [c for _, c in rate_samples[(role, label)] if c is not None]
        rates.append(RoleRates(
            role=role, label=label, turns=sum(1 for o in seen if o.role == role and o.label == label),
            flip=flip, flip_interval=interval(flips) if flip is not None and flips else None,
            conformity=conformity,
            conformity_interval=interval(conforms) if conformity is not None and conforms else None,
        ))  # fmt: skip
    return DynamicsFit(
        runs=runs, chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, claims=len(_by_item(seen)),
        turns=len(seen), bootstrap=bootstrap, seed=seed, contexts=contexts, roles=rates, markov=markov_check(seen),
        calls_per_turn=sum(o.calls for o in seen) / len(seen) if seen else 1.0,
    )  # fmt: skip
