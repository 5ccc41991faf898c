"""The model a prediction is made from (one class, or a mixture of item classes chosen by BIC), its bootstrap
replicates, and the diagnostics every command prints above its tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from debate.calibration import SMOOTHING, CalibrationClass, Labels, OwnCount, PullCount
from debate.engine import PosteriorModel, RoleModel
from experiments.dynamics.diagnostics import (
    Check,
    heterogeneity_check,
    markov_check,
    overdispersion_check,
    state_check,
)
from experiments.dynamics.family import FamilyName, PulledRates
from experiments.dynamics.model import Context, Floats, Indexed, Mixture
from experiments.dynamics.observe import Observation

__all__ = [
    "Diagnostics",
    "FamilyChoice",
    "FittedModel",
    "ModelChoice",
    "ModelKind",
    "diagnose",
    "diagnostics_of",
    "pooled_checks",
    "posterior_of",
    "pulled_parts",
    "pulled_roles",
]

ModelKind = Literal["auto", "one-class", "mixture"]
"""auto: classes of items by BIC over 1..3; one-class: every item alike; mixture: BIC over 2..3."""
FamilyChoice = Literal["auto", "tables", "pulled"]
"""How a partly labelled fit ties each class's rates (experiments.dynamics.family); auto: BIC over both."""


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
    family: FamilyName = "tables"
    """How each class's rates are tied (experiments.dynamics.family)."""

    def describe(self) -> str:
        if self.classes == 1:
            tied = "" if self.family == "tables" else f", {self.family} family"
            return f"one class of items (every item alike{tied}): {self.reason}"
        shares = "; ".join(f"{label} {', '.join(f'{s:.2f}' for s in v)}" for label, v in self.shares.items())
        tied = "" if self.family == "tables" else f" ({self.family} family)"
        return f"a mixture of {self.classes} item classes{tied}, easiest first (shares: {shares}): {self.reason}"


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
    pulled: PulledRates | None = None
    """The pulled family's counts, when it was chosen (None: each class's weighted tables)."""

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
        return posterior_of(self.indexed, self.point, self.prior, self.choice.labels, self.pulled)


def pulled_parts(rates: PulledRates, c: int) -> tuple[list[OwnCount], list[PullCount]]:
    """Class `c` of the pulled family as the calibration file stores it."""
    own = [
        OwnCount(
            role=role, label=bool(label), true=float(rates.own_true[i, label, c]), n=float(rates.own_turns[i, label, c])
        )
        for i, role in enumerate(rates.roles)
        for label in (1, 0)
    ]
    pull = [
        PullCount(role=role, repeated=float(rates.pulled[i]), shown=float(rates.shown[i]))
        for i, role in enumerate(rates.roles)
    ]
    return own, pull


def pulled_roles(rates: PulledRates) -> list[RoleModel]:
    """Each class's behaviour in the pulled family, read as the file reads it (one conversion, one smoothing)."""
    classes = []
    for c in range(rates.own_true.shape[2]):
        own, pull = pulled_parts(rates, c)
        classes.append(CalibrationClass(counts=[], family="pulled", own=own, pull=pull).roles())
    return classes


def posterior_of(
    ix: Indexed, point: Mixture, prior: float, labels: Labels | None, pulled: PulledRates | None = None
) -> PosteriorModel:
    """P(factual | turns) of a fit: the pulled family's classes, or each class's weighted tables, smoothed."""
    classes: Sequence[RoleModel] = (
        pulled_roles(pulled)
        if pulled is not None
        else [ix.behaviour(point.responsibilities[:, c], pseudo=SMOOTHING) for c in range(point.classes)]
    )
    fix = labels.recalibration if labels is not None else None
    return PosteriorModel(
        classes=classes,
        shares=point.shares,
        prior=prior,
        slope=fix.slope if fix is not None else 1.0,
        shift=fix.shift if fix is not None else 0.0,
    )


def _warnings(checks: dict[str, Check], choice: ModelChoice, share: float | None = None) -> list[str]:
    lines = []
    labels = choice.labels
    if labels is not None and labels.orientation == "assumption":
        lines.append(str(labels.assumption(choice.classes, share)))
    for line in (labels.em_line(), labels.base_rate_line(), labels.unreached_line()) if labels is not None else ():
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
                else (
                    "no correction fitted on some folds lowers the log loss of the others"
                    if labels.orientation == "labels"
                    else "too few labels to correct it"
                )
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


def pooled_checks(seen: Sequence[Observation], runs: Sequence[Sequence[Observation]]) -> list[Check]:
    """The checks on the pooled turns (chi-square references), and across `runs` when there are two or more."""
    checks = [markov_check(seen), heterogeneity_check(seen), state_check(seen)]
    return [*checks, overdispersion_check(runs)] if len(runs) > 1 else checks


def diagnostics_of(checks: list[Check], choice: ModelChoice, share: float | None = None) -> Diagnostics:
    """The checks, the model chosen and the warnings they raise."""
    warnings = _warnings({c.name: c for c in checks}, choice, share)
    return Diagnostics(checks=checks, model=choice, warnings=warnings)


def diagnose(
    seen: Sequence[Observation], choice: ModelChoice, *, runs: Sequence[Sequence[Observation]] = ()
) -> Diagnostics:
    """Every check that applies: on the fitted turns `seen`, and across `runs` (every run on these items, the fitted
    one included) when there are two or more. `fit_model` does this once for its own choice (`.diagnostics`)."""
    return diagnostics_of(pooled_checks(seen, runs), choice)
