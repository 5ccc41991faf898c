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
from typing import Literal

from debate.calibration import Check
from experiments.dynamics.observe import Observation

__all__ = ["Check", "heterogeneity_check", "markov_check", "overdispersion_check", "state_check"]

LEVELS: dict[str, float] = {"markov": 0.01, "heterogeneity": 0.01, "overdispersion": 0.01, "state": 0.001}
"""Each check's level. The state check's is lower because its p-values run small on runs of a Markov population
(over 100 runs of 500 claims: 4% below 0.01 and 14% below 0.05, while the same 100 runs pooled give p = 0.27);
the cause is not found, and at 0.1% it fired on 1 of the 100."""
MIN_CELL = 10
"""A likelihood-ratio check compares only cells of at least this many turns: fewer, and the chi-square reference
does not hold (a run too small for any such cell gets "not applicable", not "holds")."""


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


def _lr(
    name: Literal["markov", "heterogeneity", "state"],
    seen: Sequence[Observation],
    small: Callable[[Observation], tuple[object, ...]],
    large: Callable[[Observation], tuple[object, ...]],
    what: str,
) -> Check:
    cells: dict[tuple[object, ...], int] = defaultdict(int)
    for o in seen:
        cells[large(o)] += 1
    seen = [o for o in seen if cells[large(o)] >= MIN_CELL]
    small_ll, small_k = _loglik(seen, small)
    large_ll, large_k = _loglik(seen, large)
    statistic, df = max(0.0, 2 * (large_ll - small_ll)), large_k - small_k
    if not df:
        return Check(
            name=name,
            statistic=None,
            df=None,
            p_value=None,
            level=LEVELS[name],
            rejected=False,
            detail=f"not applicable: no context in which {what} can differ with {MIN_CELL} or more turns on each side",
        )
    from scipy.stats import chi2  # the experiments extra

    p_value = float(chi2.sf(statistic, df))
    detail = f"G = {statistic:.2f}, df = {df}, p = {p_value:.3g} over {len(seen)} turns"
    return Check(
        name=name,
        statistic=statistic,
        df=df,
        p_value=p_value,
        level=LEVELS[name],
        rejected=p_value < LEVELS[name],
        detail=detail,
    )


def markov_check(seen: Sequence[Observation]) -> Check:
    """Does a turn depend on the opinion before the ones it is shown?"""
    debated = [o for o in seen if o.shown and o.earlier is not None]
    return _lr(
        "markov",
        debated,
        lambda o: (o.role, o.state, o.label, o.shown),
        lambda o: (o.role, o.state, o.label, o.shown, o.earlier),
        "the opinion before",
    )


def heterogeneity_check(seen: Sequence[Observation]) -> Check:
    """Does a later turn depend on the debate's initial verdict, which it was not shown?"""
    later = [o for o in seen if o.initial is not None]
    return _lr(
        "heterogeneity",
        later,
        lambda o: (o.role, o.state, o.label, o.shown, o.earlier),
        lambda o: (o.role, o.state, o.label, o.shown, o.earlier, o.initial),
        "the initial verdict",
    )


def state_check(seen: Sequence[Observation]) -> Check:
    """Does a role shown the same verdicts behave differently in different states? Names the roles that do."""
    states: dict[tuple[object, ...], set[str]] = defaultdict(set)
    for o in seen:
        if o.shown:
            states[(o.role, o.label, o.shown)].add(o.state)
    shared = [o for o in seen if o.shown and len(states[(o.role, o.label, o.shown)]) > 1]
    check = _lr(
        "state",
        shared,
        lambda o: (o.role, o.label, o.shown),
        lambda o: (o.role, o.state, o.label, o.shown),
        "the state",
    )
    differ = []
    for role in sorted({o.role for o in shared}):
        mine = _lr(
            "state",
            [o for o in shared if o.role == role],
            lambda o: (o.label, o.shown),
            lambda o: (o.state, o.label, o.shown),
            "the state",
        )
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
            if o.position == 0:
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
