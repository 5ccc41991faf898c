"""Each role's behaviour as a small parametric model fitted to observed turns.

The model: per role, state, true label and the verdicts it was shown, P(verdict true) (a Bernoulli per context,
its MLE the share of true verdicts). Derived figures per role and label: the flip rate (the verdict differs from
the last opinion shown), the conformity rate (it repeats the last opinion shown when that opinion is wrong) and,
because agreement from shared difficulty looks like conformity, the excess agreement within item classes.
Intervals: a percentile bootstrap over items. The assumptions are checked (`diagnostics`) and the model the
predictions use (one class, or a mixture of item classes) is chosen and stated (`fitted`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from experiments.dynamics.fitted import Diagnostics, FittedModel, ModelKind
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.model import Floats, Indexed, interval
from experiments.dynamics.observe import Observation
from experiments.dynamics.predict import SelfCheck

__all__ = ["ContextFit", "DynamicsFit", "RoleRates", "fit"]


class ContextFit(BaseModel):
    """P(verdict true) in one context, with its bootstrap interval (every item alike)."""

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
    """P(verdict = last opinion shown | that opinion is wrong): agreement from shared difficulty counts too."""
    conformity_interval: tuple[float, float] | None
    excess: float | None
    """P(wrong | shown a wrong opinion) - P(wrong | shown a right one), within each item class of the fitted model,
    weighted by class: the conformity that shared difficulty does not explain."""
    excess_interval: tuple[float, float] | None


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
    diagnostics: Diagnostics
    self_checks: list[SelfCheck]
    """Per fitted run, its own setting predicted from the fit against what it observed."""
    calls_per_turn: float
    factual_share: float
    """The share of factual claims the posterior starts from (the labels', the fit's estimate, or as stated)."""


def _mean(hit: Floats, w: Floats) -> float | None:
    return float((hit * w).sum() / w.sum()) if w.sum() > 0 else None


class _Rates:
    """Flip, conformity and excess agreement of one role and label, for any item weights and class split."""

    def __init__(self, ix: Indexed, role: str, label: bool) -> None:
        chosen = [i for i, o in enumerate(ix.observations) if o.role == role and o.label == label and o.shown]
        last = np.array([ix.observations[i].shown[-1] for i in chosen], dtype=bool)
        verdict = ix.verdict[chosen].astype(bool)
        self.item = ix.item_of[chosen]
        self.flip = (verdict != last).astype(float)
        self.conform = (verdict == last).astype(float)
        self.wrong_shown = (last != label).astype(float)
        self.wrong = (verdict != label).astype(float)

    def figures(self, m: Floats, resp: Floats) -> tuple[float | None, float | None, float | None]:
        w = m[self.item]
        flip = _mean(self.flip, w)
        conformity = _mean(self.conform, w * self.wrong_shown)
        excess, total = 0.0, 0.0
        for c in range(resp.shape[1]):
            wc = w * resp[self.item, c]
            wrong_after_wrong = _mean(self.wrong, wc * self.wrong_shown)
            wrong_after_right = _mean(self.wrong, wc * (1 - self.wrong_shown))
            if wrong_after_wrong is not None and wrong_after_right is not None:
                excess += wc.sum() * (wrong_after_wrong - wrong_after_right)
                total += wc.sum()
        return flip, conformity, excess / total if total else None


def _ci(point: float | None, samples: list[float | None]) -> tuple[float, float] | None:
    kept = [s for s in samples if s is not None]
    return interval(kept) if point is not None and kept else None


def _role_rates(model: FittedModel) -> list[RoleRates]:
    ix = model.indexed
    roles = sorted({(o.role, bool(o.label)) for o in ix.observations}, key=lambda r: (r[0], not r[1]))
    weights = ix.turn_weights()
    rates = []
    for role, label in roles:
        rate = _Rates(ix, role, label)
        flip, conformity, excess = rate.figures(ix.weights(), model.point.responsibilities)
        samples = [
            rate.figures(ix.weights(m), mix.responsibilities)
            for m, (mix, _) in zip(model.weights, model.replicates, strict=True)
        ]
        rates.append(
            RoleRates(
                role=role,
                label=label,
                # a pseudo-item's turns count by its weight: an unlabelled claim's turn is one turn in all
                turns=round(
                    sum(w for o, w in zip(ix.observations, weights, strict=True) if (o.role, o.label) == (role, label))
                ),
                flip=flip,
                flip_interval=_ci(flip, [s[0] for s in samples]),
                conformity=conformity,
                conformity_interval=_ci(conformity, [s[1] for s in samples]),
                excess=excess,
                excess_interval=_ci(excess, [s[2] for s in samples]),
            )
        )
    return rates


def _contexts(model: FittedModel) -> list[ContextFit]:
    ix = model.indexed
    point = ix.behaviour().tables[0]
    samples = [ix.behaviour(m).tables[0] for m in model.weights]
    contexts = []
    for key, (true, n) in sorted(point.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2], kv[0][3])):
        role, state, label, shown = key
        values = [t / k for t, k in (s.get(key, (0.0, 0.0)) for s in samples) if k > 0]
        low, high = interval(values or [true / n])
        contexts.append(
            ContextFit(
                role=str(role),
                state=str(state),
                label=bool(label),
                shown=list(shown),  # type: ignore[call-overload]
                n=round(n),
                p_true=true / n,
                low=low,
                high=high,
            )
        )
    return contexts


def fit(
    seen: Sequence[Observation],
    *,
    runs: list[str],
    chain: str,
    min_rounds: int,
    max_rounds: int,
    bootstrap: int = 200,
    seed: int = 0,
    model: ModelKind = "auto",
    fitted: FittedModel | None = None,
    run_observations: Sequence[Sequence[Observation]] = (),
    self_checks: Sequence[SelfCheck] = (),
) -> DynamicsFit:
    """The fitted behaviour of every role, with bootstrap intervals over items, and the checks of its assumptions
    (`run_observations`: each run's turns, for the cross-run check when runs share items; a given `fitted` model
    brings its own checks)."""
    fitted = fitted or fit_model(seen, model=model, bootstrap=bootstrap, seed=seed, runs=run_observations)
    return DynamicsFit(
        runs=runs,
        chain=chain,
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        claims=len(fitted.indexed.claims),
        turns=len(seen),
        bootstrap=bootstrap,
        seed=seed,
        contexts=_contexts(fitted),
        roles=_role_rates(fitted),
        diagnostics=fitted.diagnostics,
        self_checks=list(self_checks),
        calls_per_turn=fitted.calls_per_turn,
        factual_share=fitted.prior,
    )
