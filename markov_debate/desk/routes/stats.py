"""Figures: counts, reviewer agreement over time, usage; and whether audits are being processed at all."""

from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, HTTPException, Query, Request, Response
from sqlalchemy.exc import SQLAlchemyError

from markov_debate.desk.bodies import OffLoopJson
from markov_debate.desk.calibrated import CalibrationPanel, calibration_panel
from markov_debate.desk.deps import GuardDep, Reader, SettingsDep, StoreDep, worker_of
from markov_debate.desk.metrics import CONTENT_TYPE, metrics_response
from markov_debate.desk.models import Stats
from markov_debate.desk.probes import LIVE, store_problem
from markov_debate.desk.security import Guard
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.stats import stats as compute_stats
from markov_debate.desk.store import Store
from markov_debate.desk.store.reporting import DeferralRun
from markov_debate.desk.worker import WorkerHealth

__all__ = ["probes", "router"]

router = APIRouter(prefix="/v1", tags=["stats"], route_class=OffLoopJson)


@router.get("/stats")
def stats(principal: Reader, store: StoreDep, bucket: Annotated[Literal["day", "week"], Query()] = "day") -> Stats:
    """Counts by status, verdict and task; agreement and Cohen's kappa between reviewers and the engine, in
    total and per period; model calls, tokens and cost (a submitter: of its own audits)."""
    return compute_stats(store, bucket=bucket, owner=principal.owner)


@router.get("/calibration")
def calibration(principal: Reader, store: StoreDep, settings: SettingsDep) -> CalibrationPanel | None:
    """The calibration the desk scores with (null: none): the file and its sha256, what it was fitted on and what
    it assumes; its p_factual against the reviewers' verdicts, in all and since the fit, and the drift warning (a
    submitter: on its own audits)."""
    return calibration_panel(store, settings.verifier.debate.calibration, owner=principal.owner)


async def _probe_thread(request: Request, call: Callable[[], Any]) -> Any:
    """`call` on threads of the probes' own (one limiter per app, made in its event loop): the routes' shared pool
    can be taken by a burst of keyed requests (200 at once made health take 2 s), and a load balancer must still get
    its answer at once."""
    state = request.app.state
    if getattr(state, "probe_threads", None) is None:
        state.probe_threads = anyio.CapacityLimiter(4)
    return await anyio.to_thread.run_sync(call, limiter=state.probe_threads)


@router.get("/health")
async def health(request: Request, response: Response, store: StoreDep, settings: SettingsDep, guard: GuardDep) -> Any:
    """Whether audits are being processed: the store, the in-process worker's state, the queue (pending audits
    that are due, the oldest one's wait, the last worker activity). 503 when the store does not answer, when audits
    are due and no worker has made progress for `stall_s` seconds, or when the worker has found the model endpoint
    down for `outage_s` seconds. Open without a key, so a supervisor can ask: it then shows states and counts only;
    the causes (error texts, which may name hosts) are for admins."""
    return await _probe_thread(request, lambda: _health(request, response, store, settings, guard))


def _health(request: Request, response: Response, store: Store, settings: DeskSettings, guard: Guard) -> Any:
    principal = guard.principal(request)
    detailed = principal is not None and principal.role == "admin"
    worker = worker_of(request)
    body: dict[str, Any] = {"auth": "off" if guard.open else "keys"}
    if not detailed:
        body["details"] = "causes are shown to admins"
    shown = worker.health() if worker is not None else None
    if shown is not None:
        body["worker"] = shown.model_dump(exclude=None if detailed else {"last_error"})
    body["worker_ready"] = bool(worker and worker.started.is_set() and worker.state == "running")
    try:
        body["schema"] = store.schema_revision()
        due, oldest_s, last_activity_s = store.queue_health()
        deferring = store.deferral_run()
    except (SQLAlchemyError, OSError) as exc:
        response.status_code = 503
        cause = f": {settings.redact(str(exc))}" if detailed else ""
        return body | {"ok": False, "problem": f"the audit store does not answer{cause}"}
    body["queue"] = {"due": due, "oldest_due_s": oldest_s, "last_activity_s": last_activity_s}
    problem = _problem(shown, settings, due, oldest_s, last_activity_s, detailed=detailed) or _outage(
        deferring, settings, detailed=detailed
    )
    if problem is not None:
        response.status_code = 503
        return body | {"ok": False, "problem": problem}
    return body | {"ok": True}


def _outage(run: DeferralRun | None, settings: DeskSettings, *, detailed: bool) -> str | None:
    """An outage as the store shows it, whichever process runs the workers: audits still being deferred (the
    latest within `stall_s`) and none finished for `outage_s`. Deferrals count as activity for the stall rule, so
    without this a desk would stay "ok" through a long endpoint outage."""
    if run is None or run.for_s <= settings.outage_s or run.last_s > settings.stall_s:
        return None
    why = f" (latest: {settings.redact(run.reason)})" if detailed and run.reason else ""
    return f"audits have been deferred for {run.for_s:.0f} s and none finished: the model endpoint may be down{why}"


def _problem(
    worker: WorkerHealth | None,
    settings: DeskSettings,
    due: int,
    oldest_s: float | None,
    last_activity_s: float | None,
    *,
    detailed: bool,
) -> str | None:
    """Why audits are not being processed, if they are not (the cause only for admins)."""
    why = f" ({worker.last_error})" if detailed and worker is not None and worker.last_error else ""
    if worker is not None and worker.state == "endpoint-down":
        down_for = worker.trouble_for_s or 0.0
        if down_for > settings.outage_s:
            return f"the model endpoint has been down for {down_for:.0f} s{why}"
    stalled = (
        due > 0
        and oldest_s is not None
        and oldest_s > settings.stall_s
        and (last_activity_s is None or last_activity_s > settings.stall_s)
    )
    if not stalled:
        return None
    if worker is None:
        # This server has no worker of its own (--jobs 0): it cannot tell a stopped worker from one that has
        # waited for its model endpoint since it started (that leaves no trace in the store), so it names both.
        why = (
            " (this server runs no worker itself, and no `debate worker` has claimed, deferred or finished an audit "
            "since: none may be running, or the workers may be waiting for their model endpoint; their logs say "
            "which)"
            if detailed
            else ""
        )
    return f"{due} audit(s) due and no progress for {settings.stall_s:.0f} s{why}"


probes = APIRouter(tags=["health"], route_class=OffLoopJson)
"""Liveness and readiness at the paths the guard answers too (markov_debate.desk.probes)."""


@probes.get("/livez")
async def livez() -> dict[str, str]:
    """200 while the process serves HTTP (a service manager restarts it otherwise); nothing else is asked."""
    return LIVE


@probes.get("/readyz")
async def readyz(request: Request, response: Response, store: StoreDep) -> dict[str, Any]:
    """Whether this server can take requests now: the store answers a read within 2 s (503 otherwise). The model
    endpoint is reported, not required: audits queue while it is down and run when it is back."""
    problem = await store_problem(store)
    worker = worker_of(request)
    endpoint = "unknown" if worker is None else "down" if worker.endpoint_down else "up"
    if problem is not None:
        response.status_code = 503
    return {"ready": problem is None, "store": problem or "ok", "model_endpoint": endpoint}


@probes.get("/healthz")
async def healthz(request: Request, response: Response, store: StoreDep, settings: SettingsDep, guard: GuardDep) -> Any:
    """The same answer as `/v1/health` (the guard's health path, so one check fits both servers)."""
    return await health(request, response, store, settings, guard)


# The 200's media type is declared alone (a response_class would make every error answer text/plain as well, and
# they are JSON).
@probes.get(
    "/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}}
)
def metrics(request: Request, guard: GuardDep) -> Response:
    """The desk's figures in the Prometheus text format: requests by route and status and their latency, audits
    by status, the model endpoint as the in-process worker last found it, the calibration's ECE on reviewed claims
    and its drift since the fit. With keys, an admin key is needed (Prometheus: `authorization` with the key)."""
    if guard.require(request, "read").role != "admin":
        raise HTTPException(403, "the metrics are an admin's (give Prometheus an admin key)")
    return metrics_response(request.app.state.metrics)
