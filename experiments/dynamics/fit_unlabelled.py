"""The fit of a run whose claims are not all labelled (`fit_model` comes here): the truth latent where no label
says it (experiments.dynamics.latent), the family and number of classes chosen by BIC, the labels' test
cross-validated (experiments.dynamics.label_test), and the whole as weighted labelled pseudo-items for the rest of the
dynamics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from debate.calibration import LabelAsk, Labels
from debate.engine import PosteriorModel, RoleModel, TurnContext
from experiments.dynamics.clusters import expand, typical, unreached, unreached_clusters
from experiments.dynamics.diagnostics import Check, fitted_checks
from experiments.dynamics.family import FAMILIES, FamilyName
from experiments.dynamics.fitted import (
    FamilyChoice,
    FittedModel,
    ModelChoice,
    ModelKind,
    diagnostics_of,
    posterior_of,
    pulled_roles,
)
from experiments.dynamics.label_test import folds_of, labels_of
from experiments.dynamics.latent import LatentFit, fit_latent, held_out_fits
from experiments.dynamics.mixture import fit_mixture, mixture_from
from experiments.dynamics.model import Floats, Indexed, Mixture, multiplicities
from experiments.dynamics.observe import Observation
from experiments.dynamics.replicate import Design
from experiments.dynamics.share import ShareInterval, share_interval
from experiments.dynamics.worth import ASKED, TARGET_ERROR, LabelOrder, Worth, worth

__all__ = ["fit_partly"]


def _named(c: int, family: FamilyName) -> str:
    return f"{c} class{'es' if c > 1 else ''}{'' if family == 'tables' else f' ({family})'}"


class _Choice:
    """The candidate fits (family, classes) and their BIC, fitted as they are asked for: a family's next class is
    tried only while its BIC keeps falling, unless asked for."""

    def __init__(
        self, seen: Sequence[Observation], model: ModelKind, family: FamilyChoice, seed: int, base: float | None
    ) -> None:
        self.seen, self.seed, self.base = seen, seed, base
        self.most = 1 if model == "one-class" else 3
        self.families = FAMILIES if family == "auto" else (family,)
        self.fits: dict[tuple[FamilyName, int], LatentFit] = {}
        for f in self.families:
            for c in range(1, self.most + 1):
                self.fit(f, c)
                if c >= 2 and model == "auto" and self.bics[(f, c)] > self.bics[(f, c - 1)]:
                    break

    @property
    def bics(self) -> dict[tuple[FamilyName, int], float]:
        return {key: fit.bic() for key, fit in self.fits.items()}

    def fit(self, family: FamilyName, classes: int) -> LatentFit:
        key = (family, classes)
        if key not in self.fits:
            self.fits[key] = fit_latent(self.seen, classes, seed=self.seed, base_rate=self.base, family=family)
        return self.fits[key]

    def best(self, keep: int, complete: bool = False) -> tuple[FamilyName, int]:
        """The lowest BIC among fits of at least `keep` classes (`complete`: every such fit made first)."""
        for f in self.families if complete else ():
            for c in range(keep, self.most + 1):
                self.fit(f, c)
        candidates = {key: b for key, b in self.bics.items() if key[1] >= keep}
        return min(candidates, key=lambda key: candidates[key])

    def listed(self, keep: int) -> str:
        return ", ".join(f"{_named(c, f)} {b:.1f}" for (f, c), b in sorted(self.bics.items()) if c >= keep)


def _latent_choice(
    seen: Sequence[Observation],
    model: ModelKind,
    designs: Sequence[Design],
    seed: int,
    base_rate: float | None,
    family: FamilyChoice,
) -> tuple[LatentFit, dict[int, float], str]:
    choice = _Choice(seen, model, family, seed, base_rate)
    if model == "one-class":
        chosen = choice.best(1)
        return choice.fits[chosen], {1: choice.bics[chosen]}, f"set by --model one-class; {choice.listed(1)}"
    keep = 2 if model == "mixture" else 1
    chosen = choice.best(keep)
    why = "set by --model mixture; " if model == "mixture" else ""
    if chosen[1] == 1:
        # BIC's penalty for a second class can keep one class where the items differ: the one-class model's own
        # heterogeneity check decides, as the pooled one does for a labelled run
        one = choice.fits[chosen]
        fitted = PosteriorModel(classes=_roles(one, seen), shares=one.shares, prior=one.prior)
        [_, uneven, _] = fitted_checks(seen, fitted, designs, described="the one-class model", seed=seed, runs=100)
        if uneven.rejected:
            keep, chosen = 2, choice.best(2, complete=True)
            why = f"the one-class model's heterogeneity check fails ({uneven.detail}); "
    bics = {c: b for (f, c), b in choice.bics.items() if f == chosen[0]}
    said = f"{why}BIC over the latent truth, families and classes: {choice.listed(keep)}; {_named(*chosen[::-1])}"
    return choice.fits[chosen], bics, f"{said} chosen"


def _roles(fit: LatentFit, seen: Sequence[Observation]) -> list[RoleModel]:
    """Each class's behaviour (both labels) in the fit's family."""
    if fit.pulled is not None:
        return pulled_roles(fit.pulled)
    return list(_pseudo(seen, fit)[1].components)


def _pseudo_responsibilities(ix: Indexed, fit: LatentFit) -> Floats:
    """Per pseudo-item, P(class | its label, its claim's turns)."""
    where = {item: i for i, item in enumerate(fit.items)}
    r = fit.responsibilities[[where[ix.claims[c]] for c in ix.claim_of], ix.label.astype(int), :]
    return np.asarray(r / np.maximum(r.sum(1, keepdims=True), 1e-12), dtype=np.float64)


def _pseudo(seen: Sequence[Observation], latent: LatentFit) -> tuple[Indexed, Mixture, Floats]:
    """The latent fit as weighted labelled pseudo-items, their mixture and their class responsibilities."""
    pseudo, weight, origin = expand(seen, latent)
    ix = Indexed(pseudo, weights=weight, origin=origin)
    start = _pseudo_responsibilities(ix, latent)
    return ix, mixture_from(ix, start, latent), start


def _held_out_p(seen: Sequence[Observation], latent: LatentFit, folds: list[set[str]]) -> dict[str, float] | None:
    """Each labelled claim's p_factual as the file of a fit with its fold's labels hidden gives it (None: no fold)."""
    if not folds:
        return None
    turns: dict[str, list[TurnContext]] = {}
    for o in seen:
        turns.setdefault(o.item, []).append(TurnContext(o.role, o.state, o.shown, o.verdict))
    held: dict[str, float] = {}
    for fold, fit in zip(folds, held_out_fits(seen, latent, folds), strict=True):
        ix, point, _ = _pseudo(seen, fit)
        posterior = posterior_of(ix, point, fit.prior, None, fit.pulled)
        for item in fold:
            p = posterior.p_factual(turns[item])
            if p is not None:
                held[item] = p
    return held


def fit_partly(
    seen: Sequence[Observation],
    *,
    model: ModelKind,
    bootstrap: int,
    seed: int,
    designs: Sequence[Design],
    base_rate: float | None,
    family: FamilyChoice = "auto",
    label_order: LabelOrder = "random",
) -> FittedModel:
    """The fit of a run with unlabelled claims (see the module); its bootstrap replicates refit the weighted tables
    of the pseudo-items (the predictions' intervals), whatever the family. `label_order`: how the labels worth
    asking for go on past their first two parts."""
    labels = {o.item: o.label for o in seen}
    latent, bics, reason = _latent_choice(seen, model, designs, seed, base_rate, family)
    ix, point, start = _pseudo(seen, latent)
    weights = [ix.replicate(m) for m in multiplicities(len(ix.claims), bootstrap, seed)]
    replicates = [
        (
            fit_mixture(ix, point.classes, scale=m, start=start if point.classes > 1 else None),
            ix.calls_per_turn(m),
        )
        for m in weights
    ]
    interval = share_interval(seen, latent) if base_rate is None else None
    folds = folds_of(labels, seed)
    held = _held_out_p(seen, latent, folds)
    posterior = posterior_of(ix, point, latent.prior, None, latent.pulled)
    told = labels_of(seen, labels, posterior, held, len(folds) if held else 0)
    told = _latent_labels(seen, told, latent, interval, labels, (label_order, seed))
    shares = {"factual": point.shares[True], "hallucinated": point.shares[False]}
    choice = ModelChoice(
        classes=point.classes, shares=shares, bic=bics, reason=reason, labels=told, family=latent.family
    )
    described = "the fitted one-class model" if point.classes == 1 else f"the fitted {point.classes}-class mixture"
    described += " (truth latent)" + ("" if latent.family == "tables" else f" in the {latent.family} family")
    classes = _roles(latent, seen)
    fitted = PosteriorModel(classes=classes, shares=point.shares, prior=latent.prior)
    checks: list[Check] = fitted_checks(seen, fitted, designs, described=described, seed=seed)
    return FittedModel(
        ix,
        point,
        weights,
        replicates,
        ix.calls_per_turn(),
        diagnostics_of(checks, choice, latent.prior),
        latent.prior,
        pulled=latent.pulled,
    )


TYPICAL = 5
"""Claims to label first from each class no labelled claim reaches."""


def _latent_labels(
    seen: Sequence[Observation],
    told: Labels,
    latent: LatentFit,
    interval: ShareInterval | None,
    labels: dict[str, bool | None],
    order: tuple[LabelOrder, int] = ("random", 0),
) -> Labels:
    """What the labels said, with what the turns say of the share, how EM ended and the classes no label reaches
    (their most typical claims first among those to label)."""
    clusters = unreached_clusters(latent)
    unlabelled = {item for item, label in labels.items() if label is None}
    first = typical(latent, clusters, TYPICAL, unlabelled)
    asked: dict[str, object] = {}
    if unlabelled:
        # a fully labelled run (the pulled family's route comes here too) has nothing to ask for
        found = worth(seen, latent)
        random_rest = order[0] == "random"
        asked = {
            "label_next": _label_next(told, latent, clusters, found, unlabelled, order),
            "p_error": found.error,
            "label_next_needed": None if random_rest else found.needed,
            "target_error": TARGET_ERROR,
            "followed": 0 if random_rest else found.followed,
            "label_order": order[0],
        }
    return told.model_copy(
        update={
            "base_rate": latent.base_rate,
            "share_interval": (interval.low, interval.high) if interval is not None else None,
            "share_standard_error": interval.standard_error if interval is not None else None,
            "em_steps": latent.steps,
            "em_converged": latent.converged,
            "unreached": unreached(latent),
            "to_label": first + [item for item in told.to_label if item not in first],
            **asked,
        }
    )


def _label_next(
    told: Labels,
    latent: LatentFit,
    clusters: list[tuple[int, int]],
    found: Worth,
    unlabelled: set[str],
    order: tuple[LabelOrder, int] = ("random", 0),
) -> list[LabelAsk]:
    """The order of the labels worth asking for (see `Labels.label_next`), each claim once, at most `ASKED`."""
    asks: dict[str, LabelAsk] = {}
    if told.needed:
        why = (
            f"the first labels are spread over p_factual (label {told.needed} more to test the fit and find a class "
            "that fools the agents)"
        )
        for claim in told.to_label:
            asks.setdefault(claim, LabelAsk(claim=claim, reason=why))
    for (label, c), said in zip(clusters, unreached(latent), strict=True):
        why = f"no labelled claim falls in {said}: one of its most typical claims"
        for claim in typical(latent, [(label, c)], TYPICAL, unlabelled - set(asks)):
            asks.setdefault(claim, LabelAsk(claim=claim, reason=why))
    if order[0] == "random":
        rest = sorted(unlabelled - set(asks))
        why = (
            "drawn at random (the default order past its first parts; --label-order variance ranks the rest by "
            "expected gain): random labels measure p_factual whatever the fitted family"
        )
        for i in np.random.default_rng(order[1]).permutation(len(rest))[: max(0, ASKED - len(asks))]:
            asks.setdefault(rest[i], LabelAsk(claim=rest[i], reason=why))
        return list(asks.values())[:ASKED]
    for claim, gain, p in zip(found.claims, found.gains, found.p_factual, strict=True):
        why = f"its label is expected to remove {gain:.1%} of p_factual's variance over the unlabelled claims"
        asks.setdefault(claim, LabelAsk(claim=claim, reason=why, gain=gain, p_factual=p))
    return list(asks.values())[:ASKED]
