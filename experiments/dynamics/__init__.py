"""Debate dynamics: each role's behaviour fitted from recorded turns, the assumptions behind it checked, and exact
predictions of other chains and minimum rounds from it (see docs/dynamics.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.dynamics.diagnostics import (
        Check,
        heterogeneity_check,
        markov_check,
        overdispersion_check,
        state_check,
    )
    from experiments.dynamics.fit import DynamicsFit, fit
    from experiments.dynamics.fitted import Diagnostics, FittedModel, ModelChoice, diagnose, fit_model
    from experiments.dynamics.observe import Observation, RunObservations, observations, read_run
    from experiments.dynamics.predict import Outcome, Predicted, Setting, outcome, predict

_WHERE = {
    "Check": "experiments.dynamics.diagnostics",
    "heterogeneity_check": "experiments.dynamics.diagnostics",
    "markov_check": "experiments.dynamics.diagnostics",
    "overdispersion_check": "experiments.dynamics.diagnostics",
    "state_check": "experiments.dynamics.diagnostics",
    "DynamicsFit": "experiments.dynamics.fit",
    "fit": "experiments.dynamics.fit",
    "Diagnostics": "experiments.dynamics.fitted",
    "FittedModel": "experiments.dynamics.fitted",
    "ModelChoice": "experiments.dynamics.fitted",
    "diagnose": "experiments.dynamics.fitted",
    "fit_model": "experiments.dynamics.fitted",
    "Observation": "experiments.dynamics.observe",
    "RunObservations": "experiments.dynamics.observe",
    "observations": "experiments.dynamics.observe",
    "read_run": "experiments.dynamics.observe",
    "Outcome": "experiments.dynamics.predict",
    "Predicted": "experiments.dynamics.predict",
    "Setting": "experiments.dynamics.predict",
    "outcome": "experiments.dynamics.predict",
    "predict": "experiments.dynamics.predict",
}
"""Each name's module, imported on first use: registering the `debate dynamics` commands needs no scipy."""

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "Check",
    "Diagnostics",
    "DynamicsFit",
    "FittedModel",
    "ModelChoice",
    "Observation",
    "Outcome",
    "Predicted",
    "RunObservations",
    "Setting",
    "diagnose",
    "fit",
    "fit_model",
    "heterogeneity_check",
    "markov_check",
    "observations",
    "outcome",
    "overdispersion_check",
    "predict",
    "read_run",
    "state_check",
]
