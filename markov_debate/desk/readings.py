"""What the desk's /metrics reads when Prometheus scrapes (markov_debate.desk.metrics): audits by status, the model
endpoint as the workers find it, and the calibration against the reviewers."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from sqlalchemy.exc import SQLAlchemyError

from markov_debate.desk.calibrated import calibration_panel
from markov_debate.desk.metrics import Reading
from markov_debate.desk.store import Store

__all__ = ["desk_readings"]

log = logging.getLogger(__name__)
_STATUSES = ("pending", "running", "done", "failed", "cancelled")


def desk_readings(app: FastAPI) -> Iterator[Reading]:
    store: Store = app.state.store
    worker = getattr(app.state, "worker", None)
    try:
        counts = store.by_status()
    except (SQLAlchemyError, OSError) as exc:
        log.warning("metrics: the store does not answer (%s)", type(exc).__name__)
        yield "desk_store_up", "1 when the store answered this scrape's read", [({}, 0.0)]
        return
    yield "desk_store_up", "1 when the store answered this scrape's read", [({}, 1.0)]
    yield (
        "desk_audits",
        "Audits by status (pending: waiting for a worker; running: being debated)",
        [({"status": status}, float(counts.get(status, 0))) for status in _STATUSES],
    )
    yield "desk_model_endpoint_up", _ENDPOINT_HELP, [({}, _endpoint_up(app, store, worker))]
    yield from _calibration(app, store)


_ENDPOINT_HELP = (
    "1 unless the model endpoint is failing: this server's worker finds it down, or (--jobs 0, the workers in "
    "processes of their own) the store shows audits being deferred and none finished since"
)


def _endpoint_up(app: FastAPI, store: Store, worker: Any) -> float:
    """The endpoint as the workers find it, wherever they run: a server with no worker of its own (the documented
    deployment) reads it from the store's trail, as its /v1/health does."""
    if worker is not None:
        return 0.0 if worker.endpoint_down else 1.0
    try:
        run = store.deferral_run()
    except (SQLAlchemyError, OSError):
        return math.nan  # the store did not answer: desk_store_up says so; nothing is known of the endpoint
    stall_s: float = app.state.settings.stall_s
    return 0.0 if run is not None and run.last_s <= stall_s else 1.0


def _calibration(app: FastAPI, store: Store) -> Iterator[Reading]:
    path = app.state.settings.verifier.debate.calibration
    panel = calibration_panel(store, path) if path else None
    if panel is None:
        return
    # Published whenever a calibration is in use, NaN while there is nothing to measure it on, so an alert on it
    # exists from the start.
    reviewed = panel.reviewed.ece if panel.reviewed is not None else math.nan
    text = "ECE of p_factual against the reviewers' latest verdicts, all reviewed claims (NaN: none reviewed)"
    yield "desk_calibration_reviewed_ece", text, [({}, reviewed)]
    since = panel.since_fit
    text = "ECE of p_factual on the claims reviewed since the calibration was fitted (drift; NaN: none yet)"
    yield "desk_calibration_drift_ece", text, [({}, since.ece if since is not None else math.nan)]
    text = "Claims reviewed since the calibration was fitted"
    yield "desk_calibration_drift_claims", text, [({}, float(since.claims) if since is not None else 0.0)]
