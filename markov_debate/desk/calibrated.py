"""The calibration the desk scores with, as its users see it: which file, fitted on what, and how its p_factual
holds up against the reviewers' verdicts, in all and since the fit (drift)."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from debate.calibration import Labels, Reliability, load_calibration, reliability
from debate.errors import CalibrationError
from markov_debate.desk.store import Store
from markov_debate.desk.store.db import ConflictError
from markov_debate.desk.store.reviews import Ask

__all__ = ["DRIFT_ECE", "DRIFT_MIN_CLAIMS", "CalibrationPanel", "calibration_panel", "label_next"]

DRIFT_ECE = 0.1
"""The ECE of p_factual, on claims reviewed since the fit, past which the desk warns: twice what a fit from a few
hundred labelled claims shows on its own population (docs/dynamics.md), so a warning is drift, not noise."""
DRIFT_MIN_CLAIMS = 30
"""Reviewed claims since the fit before the drift figure is read (fewer: ten bins of three)."""

_TRUTH = {"factual": True, "non_factual": False}


class CalibrationPanel(BaseModel):
    """The calibration in use and how it holds up against the reviewers."""

    model_config = ConfigDict(frozen=True)
    file: str
    """The calibration file the desk scores with (read again whenever it changes)."""
    sha256: str | None = None
    """The file as it is now: every audit's report names the one that scored it."""
    created_at: datetime | None = None
    """When the calibration was fitted."""
    fitted_on: str
    """What it was fitted on, in a line."""
    labels: Labels | None = None
    """What the fit knew of the truth (None: every fitted claim labelled)."""
    warning: str | None = None
    """Why p_factual is not calibrated, or what it assumes."""
    problem: str | None = None
    """Why the file cannot be read or used now (the workers' audits fail while it lasts)."""
    reviewed: Reliability | None = None
    """p_factual against every reviewed claim's latest verdict (factual or non-factual)."""
    since_fit: Reliability | None = None
    """The same on the claims reviewed since the calibration was fitted."""
    drift: str | None = None
    """The warning when the ECE since the fit passes `DRIFT_ECE` on `DRIFT_MIN_CLAIMS` claims or more."""


def calibration_panel(store: Store, path: str | None, *, owner: str | None = None) -> CalibrationPanel | None:
    """The panel of the calibration at `path` (None: the desk scores without one); `owner`: its figures on that
    submitter's audits only."""
    if path is None:
        return None
    try:
        calibration = load_calibration(path)
    except CalibrationError as exc:
        return CalibrationPanel(file=path, fitted_on="", problem=str(exc))
    fitted_at = calibration.created_at.replace(tzinfo=None)
    reviewed = store.reviewed_probabilities(owner=owner)
    scored = [(p, _TRUTH[label], at) for p, label, at in reviewed if label in _TRUTH]
    since = [(p, truth) for p, truth, at in scored if at >= fitted_at]
    since_fit = reliability(since) if since else None
    drift = None
    if since_fit is not None and since_fit.claims >= DRIFT_MIN_CLAIMS and since_fit.ece > DRIFT_ECE:
        drift = (
            f"p_factual has drifted: ECE {since_fit.ece:.3f} on the {since_fit.claims} claims reviewed since the fit "
            f"(over {DRIFT_ECE}); fit it again from the reviews (`debate dynamics fit EXPORT --save FILE`)"
        )
    return CalibrationPanel(
        file=path,
        sha256=calibration.sha256,
        created_at=calibration.created_at,
        fitted_on=calibration.describe(),
        labels=calibration.labels,
        warning=calibration.warning(),
        reviewed=reliability([(p, truth) for p, truth, _ in scored]) if scored else None,
        since_fit=since_fit,
        drift=drift,
    )


_DESK_CLAIM = re.compile(r"audit-(\d+)/(.+)")
"""How a fit from the desk's store or export names a claim (experiments.dynamics.observe)."""


def label_next(path: str | None) -> list[Ask]:
    """The claims the calibration at `path` asks labels for, as this desk's (audit id, claim id, why), in its order
    (read again whenever the file changes, so a new fit's order replaces the last one's). A claim a fit names
    otherwise (a results log's) is not the desk's and is left out.

    Raises:
        ConflictError: the desk scores without a calibration, the file cannot be read, or its fit made no order
            (every claim labelled, or a file from before the order).
    """
    fit = "fit one from the reviews (`debate dynamics fit --db URL --save FILE`)"
    if path is None:
        raise ConflictError(f"order=label-next needs a calibration and the desk scores without one: {fit}")
    try:
        calibration = load_calibration(path)
    except CalibrationError as exc:
        raise ConflictError(f"order=label-next: {exc}") from exc
    labels = calibration.labels
    if labels is None or not labels.label_next:
        raise ConflictError(
            f"order=label-next: the calibration {path} asks for no label (its fit had every claim labelled, or it "
            f"was saved before the order was kept): {fit}"
        )
    asks: list[Ask] = []
    for ask in labels.label_next:
        named = _DESK_CLAIM.fullmatch(ask.claim)
        if named is not None:
            asks.append((int(named.group(1)), named.group(2), ask.reason))
    return asks
