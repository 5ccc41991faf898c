"""Debate dynamics: each role's behaviour fitted from recorded turns, the assumptions behind it checked, and exact
predictions of other chains and minimum rounds from it (see docs/dynamics.md).

The modules follow the steps, each importing only the ones below it (an import-linter contract in pyproject.toml):

- observe: `observe` (turns as observations), `readers` (runs, logs, desk exports, stores), `identity`;
- model: `model` (the observations indexed; a behaviour's tables), `family` (how a cluster's rates are tied), `em`
  (EM to convergence), `latent_em` (the one EM's data and steps), `replicate` (a fitted model played forward on a
  run's design);
- fit: `latent` (every fit's EM over (label, class) clusters: its starts and its result), `diagnostics` (the
  checks), `mixture` (that EM on labelled items: the classes of a labelled run, a bootstrap replicate), `fitted`
  (what a fit returns), `fit_labelled` and `fit_unlabelled` (with `share`, `clusters`, `label_test`, `worth`), and
  `fitting` (`fit_model`, which sends a run to one of the two);
- calibrate: `calibrate` (a fit as a calibration file), `compose` (a team's file from its models' fits);
- predict: `predict` (exact outcomes of other settings), `simulate`, `endpoint`, `simulate_run`, `examples`;
- report: `rates` (the per-role figures), `report`, `commands` and `cli` (`debate dynamics`).
"""

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
