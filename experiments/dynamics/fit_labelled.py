"""The fit of a run whose every claim is labelled: one class, or a mixture of item classes chosen by BIC (or by a
heterogeneity check that fails), with its bootstrap replicates and its checks."""

from __future__ import annotations

from collections.abc import Sequence

from debate.engine import PosteriorModel
from experiments.dynamics.diagnostics import Check, fitted_checks
from experiments.dynamics.fitted import FittedModel, ModelChoice, ModelKind, diagnostics_of, pooled_checks
from experiments.dynamics.mixture import choose_classes, fit_mixture
from experiments.dynamics.model import Indexed, Mixture, multiplicities
from experiments.dynamics.observe import Observation
from experiments.dynamics.replicate import Design

__all__ = ["fit_labelled"]


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


def fit_labelled(
    seen: Sequence[Observation],
    *,
    model: ModelKind = "auto",
    bootstrap: int = 200,
    seed: int = 0,
    runs: Sequence[Sequence[Observation]] = (),
    designs: Sequence[Design] = (),
) -> FittedModel:
    """The all-labelled fit (`fit_model` with every claim labelled; the arguments are its own)."""
    ix = Indexed(seen)
    pooled = pooled_checks(seen, runs)
    uneven = [c for c in pooled if c.name in ("heterogeneity", "overdispersion") and c.rejected]
    point, bics, reason = _choose(ix, model, uneven, seed)
    if not point.converged:
        reason += f"; EM did NOT converge (stopped at its cap after {point.steps} steps): the fit is where it stopped"
    replicates, weights = [], [ix.replicate(m) for m in multiplicities(len(ix.claims), bootstrap, seed)]
    for m in weights:
        start = point.responsibilities if point.classes > 1 else None
        replicates.append((fit_mixture(ix, point.classes, scale=m, start=start), ix.calls_per_turn(m)))
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
        ix, point, weights, replicates, ix.calls_per_turn(), diagnostics_of(checks, choice), ix.factual_share()
    )
