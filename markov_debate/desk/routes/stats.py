"""Figures: counts, reviewer agreement over time, usage; and whether audits are being processed at all."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.exc import SQLAlchemyError

from markov_debate.desk.deps import GuardDep, Reader, SettingsDep, StoreDep, worker_of
from markov_debate.desk.models import Stats
from markov_debate.desk.stats import stats as compute_stats

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["stats"])


@router.get("/stats")
def stats(_: Reader, store: StoreDep, bucket: Annotated[Literal["day", "week"], Query()] = "day") -> Stats:
    """Counts by status, verdict and task; agreement and Cohen's kappa between reviewers and the engine, in
    total and per period; model calls, tokens and cost."""
    return compute_stats(store, bucket=bucket)


@router.get("/health")
def health(request: Request, response: Response, store: StoreDep, settings: SettingsDep, guard: GuardDep) -> Any:
    """Whether audits are being processed: the store, the in-process worker's state and last error, the queue
    (pending audits that are due, the oldest one's wait, the last worker activity). 503 when the store does not
    answer, or when audits are due and no worker has made progress for `stall_s` seconds. Open without a key:
    a supervisor must be able to ask, and it shows no audit content."""
    worker = worker_of(request)
    body: dict[str, Any] = {"auth": "off" if guard.open else "keys"}
    if worker is not None:
        body["worker"] = worker.health().model_dump()
    body["worker_ready"] = bool(worker and worker.started.is_set() and worker.state == "running")
    try:
        body["schema"] = store.schema_revision()
        due, oldest_s, last_activity_s = store.queue_health()
    except (SQLAlchemyError, OSError) as exc:
        response.status_code = 503
        return body | {"ok": False, "problem": f"the audit store does not answer: {settings.redact(str(exc))}"}
    body["queue"] = {"due": due, "oldest_due_s": oldest_s, "last_activity_s": last_activity_s}
    stalled = (
        due > 0
        and oldest_s is not None
        and oldest_s > settings.stall_s
        and (last_activity_s is None or last_activity_s > settings.stall_s)
    )
    if stalled:
        response.status_code = 503
        why = worker.last_error if worker is not None and worker.last_error else "no worker is running"
        problem = f"{due} audit(s) due and no progress for {settings.stall_s:.0f} s ({why})"
        return body | {"ok": False, "problem": problem}
    return body | {"ok": True}
