"""Human review: confirm or overturn one claim's outcome; the queue of claims waiting for a human."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from markov_debate.desk.bodies import OffLoopJson
from markov_debate.desk.calibrated import label_next
from markov_debate.desk.deps import Reviewer, RowId, SettingsDep, StoreDep, csrf
from markov_debate.desk.models import QueueItem, ReviewIn, ReviewInfo
from markov_debate.desk.store.reviews import QueueOrder

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["reviews"], route_class=OffLoopJson)


@router.post("/audits/{audit_id}/claims/{claim_id}/reviews", status_code=201, dependencies=[Depends(csrf)])
def review_claim(audit_id: RowId, claim_id: str, body: ReviewIn, principal: Reviewer, store: StoreDep) -> ReviewInfo:
    """Confirm or overturn the engine's outcome on one claim (appended; the report is never changed)."""
    return store.add_review(audit_id, claim_id, principal, body)


@router.get("/review-queue")
def review_queue(
    _: Reviewer,
    store: StoreDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    sample: Annotated[float | None, Query(ge=0, le=1)] = None,
    seed: Annotated[int | None, Query()] = None,
    order: Annotated[
        QueueOrder,
        Query(
            description="oldest audit first, least likely factual first, or the claims the calibration asks labels "
            "for first (label-next: 409 without a calibration that has such an order)"
        ),
    ] = "oldest",
) -> list[QueueItem]:
    """Unreviewed claims the engine did not find factual, then a seeded sample of its factual decisions
    (prefilter decisions included) for re-checking; each with its evidence, deciding opinion and (with a
    calibration) p_factual, in `order`. With label-next, the claims whose labels the calibration's fit says are
    worth most come first, each with `why`; a new calibration file brings its own order."""
    return store.review_queue(
        limit=limit,
        sample_rate=settings.queue_sample_rate if sample is None else sample,
        seed=settings.queue_seed if seed is None else seed,
        order=order,
        asks=label_next(settings.verifier.debate.calibration) if order == "label-next" else (),
    )
