"""Debate dynamics: each role's behaviour fitted from recorded turns, the assumptions behind it checked, and exact
predictions of other chains and minimum rounds from it (see docs/dynamics.md)."""

from experiments.dynamics.diagnostics import (
    Check,
    heterogeneity_check,
    markov_check,
    overdispersion_check,
    state_check,
)
from experiments.dynamics.fitted import Diagnostics, FittedModel, ModelChoice, diagnose
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.observe import Observation, RunObservations, observations
from experiments.dynamics.predict import Outcome, Predicted, Setting, outcome, predict
from experiments.dynamics.rates import DynamicsFit, fit
from experiments.dynamics.readers import read_run

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
