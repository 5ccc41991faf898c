"""The fit's entry: every claim labelled goes to experiments.dynamics.fit_labelled, any claim without a label (or
the pulled family) to experiments.dynamics.fit_unlabelled; both return a FittedModel (experiments.dynamics.fitted)."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.dynamics.fit_labelled import fit_labelled
from experiments.dynamics.fit_unlabelled import fit_partly
from experiments.dynamics.fitted import FamilyChoice, FittedModel, ModelKind
from experiments.dynamics.observe import Observation
from experiments.dynamics.replicate import Design
from experiments.dynamics.worth import LabelOrder

__all__ = ["fit_model"]


def fit_model(
    seen: Sequence[Observation],
    *,
    model: ModelKind = "auto",
    bootstrap: int = 200,
    seed: int = 0,
    runs: Sequence[Sequence[Observation]] = (),
    designs: Sequence[Design] = (),
    base_rate: float | None = None,
    family: FamilyChoice = "auto",
    label_order: LabelOrder = "random",
) -> FittedModel:
    """Fit the chosen model to `seen` and to `bootstrap` replicates of its items. auto: a mixture of item classes
    when a heterogeneity check fails (`runs`: every run on these items, for the cross-run one), else the number of
    classes BIC prefers. With the runs' `designs`, the markov, heterogeneity and state checks test the model that
    was fitted (against runs of it); without them, the pooled turns (chi-square). Claims without a label (`label`
    None) make the truth latent too (experiments.dynamics.latent), which needs the designs; `base_rate` then holds
    the share of factual claims fixed in EM (None: fitted), and `family` ties each class's rates (experiments.dynamics.
    family; auto: BIC chooses); `label_order` is how the labels worth asking for go on (experiments.dynamics.worth)."""
    if any(o.label is None for o in seen) or (family == "pulled" and designs):
        if not designs:
            raise ValueError("a fit with unlabelled claims needs the runs' designs: its checks test the fitted model")
        return fit_partly(
            seen,
            model=model,
            bootstrap=bootstrap,
            seed=seed,
            designs=designs,
            base_rate=base_rate,
            family=family,
            label_order=label_order,
        )
    if base_rate is not None:
        raise ValueError("a stated base rate is for a fit with unlabelled claims: every claim here is labelled")
    if family == "pulled":
        raise ValueError("the pulled family needs the runs' designs: its checks test the fitted model")
    return fit_labelled(seen, model=model, bootstrap=bootstrap, seed=seed, runs=runs, designs=designs)
