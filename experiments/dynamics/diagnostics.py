"""The assumptions behind a prediction, tested on the run it is fitted to.

The one-class model assumes every turn depends only on the role, the state, the claim's label and the verdicts the
role is shown. Each check tests one way that fails, at the level in `LEVELS`:

- **markov**: the opinion before the ones shown adds nothing (likelihood ratio);
- **heterogeneity**: the debate's initial verdict adds nothing to a later turn that was not shown it, beyond its
  context and the opinion before (likelihood ratio). Items of unequal difficulty fail it: an item that fooled the
  initial agent is a hard item, and it fools later agents too;
- **overdispersion**: with several runs on the same items, each item's initial verdicts vary across runs only as a
  common rate per label allows (Tarone's score test); the stronger test when runs share items;
- **state**: a role shown the same verdicts behaves the same in every state it speaks in (likelihood ratio, over the
  contexts seen in two or more states); a back-off across states assumes it.

Agreement that comes from shared difficulty looks like conformity and like memory, so when items are heterogeneous
the other checks can fail for that reason alone; the warning says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from debate.calibration import Check
from debate.engine import PosteriorModel, RoleModel, RoleTables
from experiments.dynamics.observe import Observation
from experiments.dynamics.replicate import Cell, Cells, Design, cells_of, replicate_cells

__all__ = [
    "Check",
    "fitted_checks",
    "heterogeneity_check",
    "markov_check",
    "overdispersion_check",
    "state_check",
]

LEVELS: dict[str, float] = {"markov": 0.01, "heterogeneity": 0.01, "overdispersion": 0.01, "state": 0.001}
"""Each check's level. The state check's is lower because its p-values run small on runs of a Markov population
(over 100 runs of 500 claims: 4% below 0.01 and 14% below 0.05, while the same 100 runs pooled give p = 0.27);
the cause is not found, and at 0.1% it fired on 1 of the 100."""
MIN_CELL = 10
"""A likelihood-ratio check compares only cells of at least this many turns: fewer, and the chi-square reference
does not hold (a run too small for any such cell gets "not applicable", not "holds")."""


def _loglik(cells: Cells, key: Callable[[Cell], tuple[object, ...]]) -> tuple[float, int]:
    counts: dict[tuple[object, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for cell, (true, n) in cells.items():
        counts[key(cell)][0] += true
        counts[key(cell)][1] += n
    total = 0.0
    for true, n in counts.values():
        for k in (true, n - true):
            total += k * math.log(k / n) if k else 0.0
    return total, len(counts)


@dataclass(frozen=True)
class _Test:
    """One likelihood-ratio test over a run's cells: which cells it reads, and the smaller and larger models."""

    name: Literal["markov", "heterogeneity", "state"]
    keep: Callable[[Cell], bool]
    small: Callable[[Cell], tuple[object, ...]]
    large: Callable[[Cell], tuple[object, ...]]
    what: str

    def statistic(self, cells: Cells) -> tuple[float, int, int]:
        """(G, df, turns) over the cells of at least `MIN_CELL` turns (df 0: the test does not apply)."""
        sizes: dict[tuple[object, ...], float] = defaultdict(float)
        kept = {c: v for c, v in cells.items() if self.keep(c)}
        for cell, (_, n) in kept.items():
            sizes[self.large(cell)] += n
        kept = {c: v for c, v in kept.items() if sizes[self.large(c)] >= MIN_CELL}
        small_ll, small_k = _loglik(kept, self.small)
        large_ll, large_k = _loglik(kept, self.large)
        return max(0.0, 2 * (large_ll - small_ll)), large_k - small_k, round(sum(n for _, n in kept.values()))

    def check(self, cells: Cells) -> Check:
        statistic, df, turns = self.statistic(cells)
        if not df:
            return _not_applicable(self.name, self.what)
        from scipy.stats import chi2  # the experiments extra

        p_value = float(chi2.sf(statistic, df))
        return Check(
            name=self.name,
            statistic=statistic,
            df=df,
            p_value=p_value,
            level=LEVELS[self.name],
            rejected=p_value < LEVELS[self.name],
            detail=f"G = {statistic:.2f}, df = {df}, p = {p_value:.3g} over {turns} turns",
        )


def _not_applicable(name: Literal["markov", "heterogeneity", "state"], what: str) -> Check:
    return Check(
        name=name,
        statistic=None,
        df=None,
        p_value=None,
        level=LEVELS[name],
        rejected=False,
        detail=f"not applicable: no context in which {what} can differ with {MIN_CELL} or more turns on each side",
    )


_MARKOV = _Test(
    "markov",
    lambda c: bool(c[3]) and c[4] is not None,
    lambda c: c[:4],
    lambda c: c[:5],
    "the opinion before",
)
_HETEROGENEITY = _Test(
    "heterogeneity",
    lambda c: c[5] is not None,
    lambda c: c[:5],
    lambda c: c,
    "the initial verdict",
)


def _state_test(cells: Cells, role: str | None = None) -> _Test:
    """The state test over the contexts (role, label, shown) a run shows in two or more states."""
    states: dict[tuple[object, ...], set[str]] = defaultdict(set)
    for role_, state, label, shown, *_ in cells:
        if shown:
            states[(role_, label, shown)].add(state)
    return _Test(
        "state",
        lambda c: bool(c[3]) and len(states[(c[0], c[2], c[3])]) > 1 and role in (None, c[0]),
        lambda c: (c[0], c[2], c[3]),
        lambda c: (c[0], c[1], c[2], c[3]),
        "the state",
    )


def markov_check(seen: Sequence[Observation]) -> Check:
    """Does a turn depend on the opinion before the ones it is shown?"""
    return _MARKOV.check(cells_of(seen))


def heterogeneity_check(seen: Sequence[Observation]) -> Check:
    """Does a later turn depend on the debate's initial verdict, which it was not shown?"""
    return _HETEROGENEITY.check(cells_of(seen))


def _roles(cells: Cells) -> list[str]:
    return sorted({c[0] for c in cells if c[3]})


def state_check(seen: Sequence[Observation]) -> Check:
    """Does a role shown the same verdicts behave differently in different states? Names the roles that do."""
    cells = cells_of(seen)
    check = _state_test(cells).check(cells)
    differ = []
    for role in _roles(cells):
        mine = _state_test(cells, role).check(cells)
        if mine.rejected:
            differ.append(f"{role} (p = {mine.p_value:.3g})")
    if differ:
        check = check.model_copy(update={"detail": f"{check.detail}; differs across states: {', '.join(differ)}"})
    return check


def overdispersion_check(runs: Sequence[Sequence[Observation]]) -> Check:
    """Do the same items' initial verdicts vary across runs more than a common rate per label allows?"""
    verdicts: dict[str, list[bool]] = defaultdict(list)
    labels: dict[str, bool] = {}
    for run in runs:
        for o in run:
            if o.position == 0 and o.label is not None:
                verdicts[o.item].append(o.verdict)
                labels[o.item] = o.label
    shared = {item: v for item, v in verdicts.items() if len(v) > 1}
    numerator = variance = 0.0
    for label in (True, False):
        mine = [v for item, v in shared.items() if labels[item] == label]
        rate = sum(map(sum, mine)) / max(1, sum(map(len, mine)))
        if not mine or rate in (0.0, 1.0):
            continue
        numerator += sum((sum(v) - len(v) * rate) ** 2 for v in mine) / (rate * (1 - rate)) - sum(map(len, mine))
        variance += 2 * sum(len(v) * (len(v) - 1) for v in mine)
    if not variance:
        return Check(
            name="overdispersion",
            statistic=None,
            df=None,
            p_value=None,
            level=LEVELS["overdispersion"],
            rejected=False,
            detail=f"not applicable: {len(shared)} items with initial verdicts in two or more runs, "
            "none with a rate strictly between 0 and 1",
        )
    z = numerator / math.sqrt(variance)
    from scipy.stats import norm  # the experiments extra

    p_value = float(norm.sf(z))
    detail = f"Z = {z:.2f}, p = {p_value:.3g} over {len(shared)} items seen in {len(runs)} runs"
    return Check(
        name="overdispersion",
        statistic=z,
        df=None,
        p_value=p_value,
        level=LEVELS["overdispersion"],
        rejected=p_value < LEVELS["overdispersion"],
        detail=detail,
    )


REPLICATES = 200
"""Runs of the fitted model a check compares the real run with (`fitted_checks`)."""


def _against(test: _Test, observed: Cells, simulated: Sequence[Cells], model: str) -> Check:
    """`test` on the real run against the same test on runs of the fitted model: the p-value from a chi-square
    scaled to the simulated statistics' mean and variance (so a p-value far below 1/runs is still read), with the
    share of simulated runs at least as extreme beside it."""
    statistic, df, turns = test.statistic(observed)
    values = [g for g, k, _ in (test.statistic(c) for c in simulated) if k]
    if not df or len(values) < len(simulated) / 2:
        return _not_applicable(test.name, test.what)
    from scipy.stats import chi2  # the experiments extra

    mean, variance = float(np.mean(values)), float(np.var(values, ddof=1))
    if mean <= 0 or variance <= 0:
        p_value = 1.0 if statistic <= mean else 0.0
    else:
        scale = variance / (2 * mean)
        p_value = float(chi2.sf(statistic / scale, 2 * mean**2 / variance))
    extreme = sum(v >= statistic for v in values)
    pooled = float(chi2.sf(statistic, df))
    detail = (
        f"G = {statistic:.2f} over {turns} turns; runs of {model} give G = {mean:.1f} on average, p = {p_value:.3g} "
        f"against them ({extreme} of {len(values)} runs at least as large; the chi-square alone, df = {df}: "
        f"p = {pooled:.3g})"
    )
    return Check(
        name=test.name,
        statistic=statistic,
        df=df,
        p_value=p_value,
        level=LEVELS[test.name],
        rejected=p_value < LEVELS[test.name],
        detail=detail,
        reference="fitted model",
    )


def fitted_checks(
    seen: Sequence[Observation],
    model: PosteriorModel,
    designs: Sequence[Design],
    *,
    described: str,
    runs: int = REPLICATES,
    seed: int = 0,
) -> list[Check]:
    """The markov, heterogeneity and state checks of the model that was fitted: each test's statistic on the real
    run against its distribution over `runs` runs of `model` with the real run's designs (experiments.dynamics.
    replicate). A mixture of item classes that explains the turns passes them, though the pooled chi-square checks
    fail on its shared difficulty; agents that remember, or that behave by state, fail them. `described` names the
    model in the details."""
    observed = cells_of(seen)
    labels: dict[str, bool | None] = {o.item: o.label for o in seen}
    simulated = list(replicate_cells(model, designs, labels, runs=runs, seed=seed))
    checks = [_against(test, observed, simulated, described) for test in (_MARKOV, _HETEROGENEITY)]
    # the fitted model has a table per state, so its own runs differ by state as much as the real one: the state
    # check's null is the same model with each role's contexts shared across the states that show them
    state = _state_test(observed)
    shared: set[tuple[object, ...]] = {(c[0], c[2], c[3]) for c in observed if state.keep(c)}
    pooled = PosteriorModel(
        classes=[_StatesPooled(m, shared) for m in model.classes], shares=model.shares, prior=model.prior
    )
    simulated = list(replicate_cells(pooled, designs, labels, runs=runs, seed=seed + 1))
    described = f"{described} with each role alike across states"
    checks.append(_against(state, observed, simulated, described))
    differ = []
    for role in _roles(observed):
        mine = _against(_state_test(observed, role), observed, simulated, described)
        if mine.rejected:
            differ.append(f"{role} (p = {mine.p_value:.3g})")
    if differ:
        checks[2] = checks[2].model_copy(
            update={"detail": f"{checks[2].detail}; differs across states: {', '.join(differ)}"}
        )
    return checks


@dataclass(frozen=True)
class _StatesPooled:
    """A class's behaviour with the `shared` (role, label, shown) contexts answered alike in every state."""

    model: RoleModel
    shared: set[tuple[object, ...]]

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        # a run without labels shares its contexts under the label None: they hold for either label
        pooled = (role, label, shown) in self.shared or (role, None, shown) in self.shared
        if pooled and isinstance(self.model, RoleTables):
            true, n = self.model.tables[1].get((role, "*", label, shown), (0.0, 0.0))
            if n > 0:
                return true / n
        return self.model.p(role, state, label, shown)
