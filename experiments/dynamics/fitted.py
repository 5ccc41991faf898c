"""The model a prediction is made from (one class, or a mixture of item classes chosen by BIC), its bootstrap
replicates, and the diagnostics every command prints above its tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from debate.calibration import SMOOTHING, Labels
from debate.engine import PosteriorModel
from experiments.dynamics.diagnostics import (
    Check,
    fitted_checks,
    heterogeneity_check,
    markov_check,
    overdispersion_check,
    state_check,
)
from experiments.dynamics.labelled import labels_of
from experiments.dynamics.latent import LatentFit, ShareInterval, expand, fit_latent, share_interval
from experiments.dynamics.mixture import choose_classes, fit_mixture, mixture_from
from experiments.dynamics.model import Behaviour, Context, Floats, Indexed, Mixture, multiplicities
from experiments.dynamics.observe import Observation
from experiments.dynamics.replicate import Design

__all__ = ["Diagnostics", "FittedModel", "ModelChoice", "ModelKind", "diagnose", "fit_model"]

ModelKind = Literal["auto", "one-class", "mixture"]
"""auto: classes of items by BIC over 1..3; one-class: every item alike; mixture: BIC over 2..3."""


class ModelChoice(BaseModel):
    """Which model the predictions come from, and why."""

    model_config = ConfigDict(frozen=True)
    classes: int
    """1: every item alike (the plain Markov model); more: latent classes of items."""
    shares: dict[str, list[float]]
    """Per true label ("factual", "hallucinated"), the share of items in each class (class 1 the easiest)."""
    bic: dict[int, float]
    """BIC per number of classes tried (lower is better)."""
    reason: str
    labels: Labels | None = None
    """What the fit knew of the truth (None: every claim labelled)."""

    def describe(self) -> str:
        if self.classes == 1:
            return f"one class of items (every item alike): {self.reason}"
        shares = "; ".join(f"{label} {', '.join(f'{s:.2f}' for s in v)}" for label, v in self.shares.items())
        return f"a mixture of {self.classes} item classes, easiest first (shares: {shares}): {self.reason}"


class Diagnostics(BaseModel):
    """The checks of the model's assumptions on the fitted run(s), the model used, and the warnings they raise."""

    model_config = ConfigDict(frozen=True)
    checks: list[Check]
    model: ModelChoice
    warnings: list[str]
    """Each a line saying which assumption fails and what that means for the figures."""

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


@dataclass
class FittedModel:
    """The point fit, its bootstrap replicates (with calls per turn), and the choice."""

    indexed: Indexed
    point: Mixture
    weights: list[Floats]
    """Each replicate's item scale (its claims' multiplicities; `Indexed.weights` applies the base weights)."""
    replicates: list[tuple[Mixture, float]]
    calls_per_turn: float
    diagnostics: Diagnostics
    """The checks on the fitted turns (and across runs when given), the model chosen, and the warnings."""
    prior: float
    """The share of factual claims the posterior starts from: the labels' share, the latent fit's estimate, or the
    base rate stated for it."""

    @property
    def choice(self) -> ModelChoice:
        return self.diagnostics.model

    @property
    def claims(self) -> int:
        """Claims fitted (an unlabelled claim is two pseudo-items, one claim)."""
        return len(self.indexed.claims)

    def class_counts(self, c: int) -> list[tuple[Context, float, float]]:
        """Class `c`'s weighted (true verdicts, turns) per context: what the calibration file stores."""
        return self.indexed.counts(self.point.responsibilities[:, c])

    @property
    def posterior(self) -> PosteriorModel:
        """P(factual | turns) as the saved calibration file computes it: each class's tables from its weighted counts,
        smoothed by the file's pseudo-counts (debate.calibration.SMOOTHING), the fit's prior and any correction by
        labels. The one posterior of a fit: the recalibration is fitted on it, validate and the predictions of the
        posterior stop use it, and a file re-read gives it back."""
        return _posterior(self.indexed, self.point, self.prior, self.choice.labels)


def _posterior(ix: Indexed, point: Mixture, prior: float, labels: Labels | None) -> PosteriorModel:
    classes = [ix.behaviour(point.responsibilities[:, c], pseudo=SMOOTHING) for c in range(point.classes)]
    fix = labels.recalibration if labels is not None else None
    return PosteriorModel(
        classes=classes,
        shares=point.shares,
        prior=prior,
        slope=fix.slope if fix is not None else 1.0,
        shift=fix.shift if fix is not None else 0.0,
    )


def _bic_line(bics: dict[int, float], chosen: int) -> str:
    listed = ", ".join(f"{c} class{'es' if c > 1 else ''} {b:.1f}" for c, b in bics.items())
    return f"BIC {listed}; {chosen} the lowest"


def _choose(ix: Indexed, model: ModelKind, uneven: list[Check], seed: int) -> tuple[Mixture, dict[int, float], str]:
    if model == "one-class":
        return fit_mixture(ix, 1), {}, "set by --model one-class"
    point, bics = choose_classes(ix, most=3, seed=seed)
    if model == "auto" and not uneven:
        return point, bics, _bic_line(bics, point.classes)
    # a heterogeneity check that fails is evidence enough for classes, even where BIC's penalty for a whole second
    # table of contexts keeps one class on a few hundred items
    why = (
        "set by --model mixture"
        if model == "mixture"
        else f"the {uneven[0].name} check on the pooled turns fails ({uneven[0].detail})"
    )
    bics = {c: b for c, b in bics.items() if c > 1}
    chosen = min(bics, key=lambda c: bics[c])
    point = point if point.classes == chosen else fit_mixture(ix, chosen, seed=seed)
    return point, bics, f"{why}; {_bic_line(bics, chosen)} of 2 and 3"


def fit_model(
    seen: Sequence[Observation],
    *,
    model: ModelKind = "auto",
    bootstrap: int = 200,
    seed: int = 0,
    runs: Sequence[Sequence[Observation]] = (),
    designs: Sequence[Design] = (),
    base_rate: float | None = None,
) -> FittedModel:
    """Fit the chosen model to `seen` and to `bootstrap` replicates of its items. auto: a mixture of item classes
    when a heterogeneity check fails (`runs`: every run on these items, for the cross-run one), else the number of
    classes BIC prefers. With the runs' `designs`, the markov, heterogeneity and state checks test the model that
    was fitted (against runs of it); without them, the pooled turns (chi-square). Claims without a label (`label`
    None) make the truth latent too (experiments.dynamics.latent), which needs the designs; `base_rate` then holds
    the share of factual claims fixed in EM (None: fitted)."""
    if any(o.label is None for o in seen):
        if not designs:
            raise ValueError("a fit with unlabelled claims needs the runs' designs: its checks test the fitted model")
        return _fit_latent(seen, model=model, bootstrap=bootstrap, seed=seed, designs=designs, base_rate=base_rate)
    if base_rate is not None:
        raise ValueError("a stated base rate is for a fit with unlabelled claims: every claim here is labelled")
    ix = Indexed(seen)
    pooled = _checks(seen, runs)
    uneven = [c for c in pooled if c.name in ("heterogeneity", "overdispersion") and c.rejected]
    point, bics, reason = _choose(ix, model, uneven, seed)
    replicates, weights = [], [ix.replicate(m) for m in multiplicities(len(ix.claims), bootstrap, seed)]
    for m in weights:
        start = point.responsibilities if point.classes > 1 else None
        replicates.append((fit_mixture(ix, point.classes, scale=m, start=start, iterations=60), ix.calls_per_turn(m)))
    shares = {"factual": point.shares[True], "hallucinated": point.shares[False]}
    choice = ModelChoice(classes=point.classes, shares=shares, bic=bics, reason=reason)
    checks = pooled
    if designs:
        fitted = PosteriorModel(classes=point.components, shares=point.shares, prior=ix.factual_share())
        described = "the fitted one-class model" if point.classes == 1 else f"the fitted {point.classes}-class mixture"
        checks = [
            *fitted_checks(seen, fitted, designs, described=described, seed=seed),
            *(c for c in pooled if c.name == "overdispersion"),
        ]
    return FittedModel(
        ix, point, weights, replicates, ix.calls_per_turn(), _diagnostics(checks, choice), ix.factual_share()
    )


def _latent_choice(
    seen: Sequence[Observation], model: ModelKind, designs: Sequence[Design], seed: int, base_rate: float | None
) -> tuple[LatentFit, dict[int, float], str]:
    tried = (1,) if model == "one-class" else (1, 2, 3)
    fits = {c: fit_latent(seen, c, seed=seed, base_rate=base_rate) for c in tried}
    bics = {c: f.bic() for c, f in fits.items()}
    if model == "one-class":
        return fits[1], bics, "set by --model one-class"
    candidates = {c: b for c, b in bics.items() if model == "auto" or c > 1}
    chosen = min(candidates, key=lambda c: candidates[c])
    why = "set by --model mixture; " if model == "mixture" else ""
    if chosen == 1:
        # BIC's penalty for a whole second table can keep one class where the items differ: the one-class model's
        # own heterogeneity check decides, as the pooled one does for a labelled run
        one = fits[1]
        fitted = PosteriorModel(classes=_classes(one, seen), shares=one.shares, prior=one.prior)
        [_, uneven, _] = fitted_checks(seen, fitted, designs, described="the one-class model", seed=seed, runs=100)
        if uneven.rejected:
            candidates = {c: b for c, b in bics.items() if c > 1}
            chosen = min(candidates, key=lambda c: candidates[c])
            why = f"the one-class model's heterogeneity check fails ({uneven.detail}); "
    listed = ", ".join(f"{c} class{'es' if c > 1 else ''} {b:.1f}" for c, b in candidates.items())
    return fits[chosen], bics, f"{why}BIC over the latent truth and classes: {listed}; {chosen} chosen"


def _classes(fit: LatentFit, seen: Sequence[Observation]) -> list[Behaviour]:
    """Each class's behaviour (both labels) from the latent fit's responsibilities."""
    pseudo, weight, origin = expand(seen, fit)
    ix = Indexed(pseudo, weights=weight, origin=origin)
    return mixture_from(ix, _pseudo_responsibilities(ix, fit)).components


def _pseudo_responsibilities(ix: Indexed, fit: LatentFit) -> Floats:
    """Per pseudo-item, P(class | its label, its claim's turns)."""
    where = {item: i for i, item in enumerate(fit.items)}
    r = fit.responsibilities[[where[ix.claims[c]] for c in ix.claim_of], ix.label.astype(int), :]
    return np.asarray(r / np.maximum(r.sum(1, keepdims=True), 1e-12), dtype=np.float64)


def _fit_latent(
    seen: Sequence[Observation],
    *,
    model: ModelKind,
    bootstrap: int,
    seed: int,
    designs: Sequence[Design],
    base_rate: float | None,
) -> FittedModel:
    labels = {o.item: o.label for o in seen}
    # the labels are held out of the fit: they test it and correct it (experiments.dynamics.labelled)
    seen = [replace(o, label=None) for o in seen]
    latent, bics, reason = _latent_choice(seen, model, designs, seed, base_rate)
    pseudo, weight, origin = expand(seen, latent)
    ix = Indexed(pseudo, weights=weight, origin=origin)
    start = _pseudo_responsibilities(ix, latent)
    point = mixture_from(ix, start)
    weights = [ix.replicate(m) for m in multiplicities(len(ix.claims), bootstrap, seed)]
    replicates = [
        (
            fit_mixture(ix, point.classes, scale=m, start=start if point.classes > 1 else None, iterations=60),
            ix.calls_per_turn(m),
        )
        for m in weights
    ]
    interval = share_interval(seen, latent) if base_rate is None else None
    told = _latent_labels(labels_of(seen, labels, _posterior(ix, point, latent.prior, None)), latent, interval)
    shares = {"factual": point.shares[True], "hallucinated": point.shares[False]}
    choice = ModelChoice(classes=point.classes, shares=shares, bic=bics, reason=reason, labels=told)
    described = "the fitted one-class model" if point.classes == 1 else f"the fitted {point.classes}-class mixture"
    described += " (truth latent)"
    fitted = PosteriorModel(classes=point.components, shares=point.shares, prior=latent.prior)
    checks = fitted_checks(seen, fitted, designs, described=described, seed=seed)
    return FittedModel(
        ix, point, weights, replicates, ix.calls_per_turn(), _diagnostics(checks, choice, latent.prior), latent.prior
    )


def _latent_labels(told: Labels, latent: LatentFit, interval: ShareInterval | None) -> Labels:
    """What the labels said, with what the turns say of the share and how EM ended."""
    return told.model_copy(
        update={
            "base_rate": latent.base_rate,
            "share_interval": (interval.low, interval.high) if interval is not None else None,
            "share_standard_error": interval.standard_error if interval is not None else None,
            "em_steps": latent.steps,
            "em_converged": latent.converged,
        }
    )


def _warnings(checks: dict[str, Check], choice: ModelChoice, share: float | None = None) -> list[str]:
    lines = []
    labels = choice.labels
    if labels is not None and labels.orientation == "assumption":
        lines.append(str(labels.assumption(choice.classes, share)))
    for line in (labels.em_line(), labels.base_rate_line()) if labels is not None else ():
        if line is not None:
            lines.append(line)
    if labels is not None and labels.agreement is not None and " disagree " in labels.agreement:
        fix = labels.recalibration
        lines.append(
            f"{labels.agreement}: "
            + (
                f"p_factual is corrected by them (log-odds x {fix.slope:.2f} {fix.shift:+.2f}; likelihood ratio "
                f"{fix.statistic:.1f}, p = {fix.p_value:.3g}); items that fool the agents would do this"
                if fix is not None
                else "too few labels to correct it"
            )
        )
    against = checks["markov"].reference == "fitted model"
    uneven = [checks[n] for n in ("heterogeneity", "overdispersion") if n in checks and checks[n].rejected]
    if against and choice.classes > 1:
        # the cross-run check pools the classes; only the test against the fitted mixture says it falls short
        uneven = [c for c in uneven if c.name == "heterogeneity"]
    if uneven:
        found = "; ".join(f"{c.name} check {c.detail}" for c in uneven)
        if against and choice.classes > 1:
            lines.append(
                f"the items differ in difficulty more than the {choice.classes}-class mixture explains ({found}): "
                "its predictions and p_factual are not reliable for this run"
            )
        elif choice.classes == 1:
            lines.append(
                f"predictions assume items of equal difficulty; they are not reliable for this run because "
                f"the items are heterogeneous ({found}) and the model used has one class (try --model "
                "mixture)"
            )
        else:
            lines.append(
                f"the items are heterogeneous ({found}); the predictions come from a {choice.classes}-class "
                "mixture of items, which assumes each class is Markov"
            )
    if checks["markov"].rejected:
        why = " (or the items' unequal difficulty, above)" if uneven and not against else ""
        lines.append(
            f"predictions assume a turn depends only on the opinions it is shown; they are not reliable "
            f"for this run because the Markov check fails ({checks['markov'].detail}): the agents remember "
            f"earlier opinions{why}"
        )
    if checks["state"].rejected:
        lines.append(
            f"a role behaves differently by state ({checks['state'].detail}): a prediction that backs off "
            "across states is not reliable (rows that back off say so)"
        )
    return lines


def _checks(seen: Sequence[Observation], runs: Sequence[Sequence[Observation]]) -> list[Check]:
    checks = [markov_check(seen), heterogeneity_check(seen), state_check(seen)]
    return [*checks, overdispersion_check(runs)] if len(runs) > 1 else checks


def _diagnostics(checks: list[Check], choice: ModelChoice, share: float | None = None) -> Diagnostics:
    warnings = _warnings({c.name: c for c in checks}, choice, share)
    return Diagnostics(checks=checks, model=choice, warnings=warnings)


def diagnose(
    seen: Sequence[Observation], choice: ModelChoice, *, runs: Sequence[Sequence[Observation]] = ()
) -> Diagnostics:
    """Every check that applies: on the fitted turns `seen`, and across `runs` (every run on these items, the fitted
    one included) when there are two or more. `fit_model` does this once for its own choice (`.diagnostics`)."""
    return _diagnostics(_checks(seen, runs), choice)
