"""Debate dynamics: each role's behaviour fitted from recorded turns, and exact predictions of other chains and
minimum rounds from it (see README, "Debate dynamics")."""

from experiments.dynamics.fit import DynamicsFit, MarkovCheck, fit, markov_check
from experiments.dynamics.observe import Observation, RunObservations, observations, read_run
from experiments.dynamics.predict import Outcome, Predicted, Setting, outcome, predict

__all__ = [
    "DynamicsFit",
    "MarkovCheck",
    "Observation",
    "Outcome",
    "Predicted",
    "RunObservations",
    "Setting",
    "fit",
    "markov_check",
    "observations",
    "outcome",
    "predict",
    "read_run",
]
