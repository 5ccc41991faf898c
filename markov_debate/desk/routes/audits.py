"""`/v1/audits`: submit one response, read it back, cancel or retry it, export what is finished."""

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BeforeValidator

from debate.types import ReportVerdict
from markov_debate.desk.bodies import OffLoopJson
from markov_debate.desk.deps import (
    ID_MAX,
    PAGE_MAX,
    Canceller,
    Exporter,
    Reader,
    RowId,
    SettingsDep,
    StoreDep,
    Submitter,
    csrf,
    stop_running,
    utc,
    validated,
)
from markov_debate.desk.export import EXPORT_MEDIA, ExportFormat, export_stream
from markov_debate.desk.models import AuditDetail, AuditPage, AuditStatus, GuardAction, iso_moment
from markov_debate.desk.requests import AuditRequest

__all__ = ["router"]

router = APIRouter(prefix="/v1/audits", tags=["audits"], route_class=OffLoopJson)


@router.post("", status_code=202, dependencies=[Depends(csrf)])
def submit_audit(
    body: AuditRequest,
    response: Response,
    principal: Submitter,
    store: StoreDep,
    settings: SettingsDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> dict[str, Any]:
    """Queue one response for audit; 202 with its id. Repeating an Idempotency-Key returns the first audit (and
    brings it back to the queue if it had failed; 409 naming it if it was cancelled)."""
    request = validated(body, settings)
    audit_id, created = store.submit(
        principal, request, idempotency_key=idempotency_key, max_pending=settings.key_max_pending
    )
    response.headers["Location"] = f"/v1/audits/{audit_id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return {"id": audit_id, "status": store.status(audit_id), "url": f"/v1/audits/{audit_id}"}


@router.get("")
def list_audits(
    principal: Reader,
    store: StoreDep,
    verdict: Annotated[ReportVerdict | None, Query()] = None,
    task: Annotated[str | None, Query()] = None,
    status: Annotated[AuditStatus | None, Query()] = None,
    reviewed: Annotated[bool | None, Query()] = None,
    q: Annotated[str | None, Query(max_length=500)] = None,
    since: Annotated[datetime | None, BeforeValidator(iso_moment), Query()] = None,
    batch: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
    guard_action: Annotated[GuardAction | None, Query()] = None,
    page: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
) -> AuditPage:
    """Audits, newest first, by verdict, task, status, reviewed or not, text (`q`), creation time (`since`), and
    what `debate guard` did with the answer (`guard_action`: e.g. the blocked ones). A submitter sees its own. Page
    on with `before=` the answer's `next_before` (as fast at any depth as on the first page); `page=` still works but
    skips rows to get there."""
    return store.audits(
        owner=principal.owner,
        verdict=verdict,
        task=task,
        status=status,
        reviewed=reviewed,
        q=q,
        since=utc(since),
        batch_id=batch,
        guard_action=guard_action,
        page=page,
        per_page=per_page,
        before=before,
    )


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The finished audits in the format asked for.",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
            },
        }
    },
)
def export(_: Exporter, store: StoreDep, format: Annotated[ExportFormat, Query()] = "jsonl") -> StreamingResponse:
    """Finished audits: jsonl (request, report as stored, reviews), csv (one row per claim with its latest
    review), refchecker (RefChecker's JSON array: claims, Y, ys)."""
    media, suffix = EXPORT_MEDIA[format]
    return StreamingResponse(
        export_stream(store, format),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="audits.{suffix}"'},
    )


@router.get("/{audit_id}")
def get_audit(audit_id: RowId, principal: Reader, store: StoreDep) -> AuditDetail:
    """Status, request, the Report as the engine produced it, reviews and the trail (a submitter: its own)."""
    return store.audit(audit_id, owner=principal.owner)


@router.get("/{audit_id}/report")
def get_report(audit_id: RowId, principal: Reader, store: StoreDep) -> Response:
    """The stored report, byte for byte (409 with the audit's status until it is done)."""
    stored = store.report_json(audit_id, owner=principal.owner)
    if stored is None:
        # The audit exists (report_json raised NotFoundError otherwise): its state, not its absence, is the answer.
        status = store.status(audit_id)
        return JSONResponse(
            {"detail": f"audit {audit_id} has no report yet ({status})", "id": audit_id, "status": status},
            status_code=409,
        )
    return Response(stored, media_type="application/json")


@router.post("/{audit_id}/cancel", dependencies=[Depends(csrf)])
def cancel_audit(request: Request, audit_id: RowId, principal: Canceller, store: StoreDep) -> dict[str, Any]:
    """Cancel a pending or running audit (a finished one stays as it is); a running one stops before its next
    model call."""
    status = store.cancel(audit_id, principal)
    stop_running(request, audit_id)
    return {"id": audit_id, "status": status}


@router.post("/{audit_id}/retry", dependencies=[Depends(csrf)])
def retry_audit(audit_id: RowId, principal: Submitter, store: StoreDep) -> dict[str, Any]:
    """Bring a failed or cancelled audit back to the queue with its attempts reset (409 for any other status)."""
    return {"id": audit_id, "status": store.retry(audit_id, principal)}
