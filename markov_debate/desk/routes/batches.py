"""`/v1/batches`: upload many responses at once (JSONL or a RefChecker array), follow, cancel or retry them."""

import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as FormError

from debate.plugins import TASKS
from markov_debate.desk.bodies import OffLoopJson
from markov_debate.desk.deps import Canceller, Reader, RowId, StoreDep, Submitter, csrf
from markov_debate.desk.models import BatchInfo
from markov_debate.desk.requests import unstorable
from markov_debate.desk.security import FORM_LIMITS, Guard
from markov_debate.desk.uploads import UploadPool

__all__ = ["NAME_LIMIT", "router", "upload_batch"]

router = APIRouter(prefix="/v1/batches", tags=["batches"], route_class=OffLoopJson)

NAME_LIMIT = 200
"""Longest batch name (the column holds 500; a longer one is a mistake, not a name)."""


async def upload_batch(
    request: Request,
    task: str,
    name: str | None,
    upload: UploadFile | None,
    *,
    idempotency_key: str | None = None,
) -> tuple[BatchInfo, bool]:
    """Queue an upload (a multipart file, or the request's own body), shared by the API and the upload form;
    (the batch, created). The body is spooled to a file as it arrives and parsed in a worker thread (see
    markov_debate.desk.ingest)."""
    guard: Guard = request.app.state.guard
    principal = guard.require(request, "submit")
    if task not in TASKS.names():
        raise HTTPException(422, f"task: {TASKS.unknown(task)}")  # a long name is quoted by its start only
    if name is not None and len(name) > NAME_LIMIT:
        raise HTTPException(422, f"name: at most {NAME_LIMIT} characters")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "upload"
        with path.open("wb") as out:
            if upload is not None:
                while chunk := await upload.read(1 << 20):
                    out.write(chunk)
                name = name or upload.filename
            else:
                async for chunk in request.stream():
                    out.write(chunk)
        if name is not None and (why := unstorable(name)) is not None:
            raise HTTPException(422, f"name: {why}")  # a form field or a file name: kept in the batch's row
        pool: UploadPool = request.app.state.uploads
        return await pool.ingest(
            path, principal=principal, task=task, name=(name or "upload")[:NAME_LIMIT], idempotency_key=idempotency_key
        )


@router.post("", status_code=202, dependencies=[Depends(csrf)])
async def submit_batch(
    request: Request,
    response: Response,
    task: Annotated[str, Query()] = "qa",
    name: Annotated[str | None, Query(max_length=NAME_LIMIT)] = None,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> BatchInfo:
    """Queue a JSONL or RefChecker JSON-array upload: a multipart `file` (with form fields `task`, `name`), or
    the raw body (Content-Type application/x-ndjson or application/json) with `?task=`. Unreadable lines are
    listed in `input_errors`; the others are queued. Sending an upload again with the same Idempotency-Key
    returns the first batch (Idempotent-Replayed: true) and queues nothing; the key with other bytes is 409."""
    request.app.state.guard.require(request, "submit")  # before the body is read: a stranger spools nothing
    upload: UploadFile | None = None
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await _one_file_form(request)
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise HTTPException(422, "file: a multipart upload needs a `file` field")
        upload = file
        task = str(form.get("task") or task)
        name = str(form.get("name") or "") or name
    info, created = await upload_batch(request, task, name, upload, idempotency_key=idempotency_key)
    response.headers["Location"] = f"/v1/batches/{info.id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return info


async def _one_file_form(request: Request) -> FormData:
    """The upload's form, with one file part at most: a second is refused (422 naming `file`), never silently
    used. Starlette says so as a 400 of its own (its limit); the other form errors stay as it words them."""
    try:
        return await request.form(**FORM_LIMITS)
    except FormError as exc:
        if exc.status_code == 400 and "files" in str(exc.detail).lower():
            raise HTTPException(422, f"file: one file part per upload ({exc.detail})") from exc
        raise


@router.get("")
def list_batches(principal: Reader, store: StoreDep) -> list[BatchInfo]:
    """Recent batches with their progress (a submitter: its own)."""
    return store.batches(owner=principal.owner)


@router.get("/{batch_id}")
def get_batch(batch_id: RowId, principal: Reader, store: StoreDep) -> BatchInfo:
    """A batch's progress (audits by status) and unreadable lines (a submitter: its own)."""
    return store.batch(batch_id, owner=principal.owner)


@router.post("/{batch_id}/cancel", dependencies=[Depends(csrf)])
def cancel_batch(batch_id: RowId, principal: Canceller, store: StoreDep) -> dict[str, Any]:
    """Cancel a batch's pending and running audits."""
    return {"cancelled": store.cancel_batch(batch_id, principal), "batch": store.batch(batch_id)}


@router.post("/{batch_id}/retry-failed", dependencies=[Depends(csrf)])
def retry_failed_batch(batch_id: RowId, principal: Submitter, store: StoreDep) -> dict[str, Any]:
    """Bring a batch's failed audits back to the queue."""
    return {"requeued": store.retry_failed(principal, batch_id=batch_id), "batch": store.batch(batch_id)}
