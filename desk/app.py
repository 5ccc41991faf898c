"""The desk's FastAPI app: the JSON API under /v1, the web UI at /, OpenAPI at /docs.

`create_app(settings)` opens the store and, unless `settings.jobs` is 0, runs one worker in the server process.
Annotations are evaluated at definition (no `from __future__ import annotations`): the routes' dependency aliases
are local to `create_app`, where FastAPI could not resolve them from strings.
"""

import asyncio
import csv
import importlib.util
import io
import json
import logging
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

from fastapi import Depends, FastAPI, Form, Header, HTTPException, Query, Request, UploadFile
from fastapi import Path as FastPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import UploadFile as StarletteUpload

from debate.errors import InputError, UsageError
from debate.extras import install_command
from debate.provenance import package_version
from debate.refchecker import refchecker_item
from debate.stages import TASKS
from debate.types import ClaimLabel, ReportVerdict
from desk.auth import Permission, Principal
from desk.ingest import IngestError, ingest
from desk.models import (
    AuditDetail,
    AuditOverrides,
    AuditPage,
    AuditRequest,
    AuditStatus,
    BatchInfo,
    QueueItem,
    ReviewIn,
    ReviewInfo,
    Stats,
    checked_request,
)
from desk.security import CSRF_COOKIE, SESSION_COOKIE, AllowedHosts, BodyLimit, Guard, SecurityHeaders
from desk.settings import DeskSettings
from desk.store import ConflictError, NotFoundError, Store, StoreError, engine_label
from desk.views import (
    Segment,
    agreement_png,
    chain_diagrams,
    claim_label,
    reviewed_claims,
    reviewed_verdict,
    segments,
)
from desk.worker import Worker

__all__ = ["create_app"]


_ID_MAX = 2**31 - 1
"""Largest audit or batch id any store holds (PostgreSQL's integer); a larger one is a 422, not a database error."""
_PAGE_MAX = 1_000_000
RowId = Annotated[int, FastPath(ge=1, le=_ID_MAX)]


def _utc(since: datetime | None) -> datetime | None:
    """`since` as naive UTC, the store's clock; an offset that moves it out of the calendar is the caller's error."""
    if since is None or since.tzinfo is None:
        return since
    try:
        return since.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError) as exc:
        raise HTTPException(422, f"since: {since.isoformat()} is out of range in UTC") from exc


_NAME_LIMIT = 200
"""Longest batch name (the column holds 500; a longer one is a mistake, not a name)."""


def _trouble(worker: Worker | None) -> str | None:
    """What a page's banner says while the in-process worker waits for the endpoint or the store."""
    if worker is None or worker.state not in ("endpoint-down", "store-unavailable"):
        return None
    return f"{worker.last_error}. Audits wait in the queue, keep their attempts, and resume when it is back."


def _swagger_assets() -> Path:
    """Swagger UI's files as the fastapi-offline package ships them (found, not imported: we use only its assets)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise UsageError(f"the desk's /docs needs fastapi-offline: {install_command('desk')}")
    return Path(spec.origin).parent / "static"


_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>markov-debate audit desk: API</title>
<link rel="icon" href="/favicon.ico"><link rel="stylesheet" href="/static/swagger/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script><script src="/static/docs.js"></script></body></html>
"""
"""The API reference page: Swagger UI's packaged assets and our own start-up script (no CDN, no inline script)."""

log = logging.getLogger(__name__)
_HERE = Path(__file__).parent
_VERDICTS: tuple[str, ...] = get_args(ReportVerdict)


def create_app(settings: DeskSettings, *, store: Store | None = None) -> FastAPI:
    """The app over `store` (opened from settings.db_url when not given)."""
    store = store or Store(
        settings.db_url,
        price_prompt_per_mtok=settings.price_prompt_per_mtok,
        price_completion_per_mtok=settings.price_completion_per_mtok,
    )
    guard = Guard(settings.keys, settings.session_secret, revoked=store.session_revoked)
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    templates.env.autoescape = True  # every template, whatever its name: nothing a user or model wrote is markup
    templates.env.globals.update(version=package_version(), verdicts=_VERDICTS, tasks=TASKS.names())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        if settings.jobs > 0:
            worker = Worker(store, settings)
            app.state.worker = worker
            task = asyncio.create_task(worker.run(stop), name="desk-worker")
            task.add_done_callback(_report_worker_exit)
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                await asyncio.wait([task])  # its failure, if any, was logged by _report_worker_exit

    app = FastAPI(
        docs_url=None,  # served below from packaged assets, so /docs works offline and under our CSP
        redoc_url=None,
        title="markov-debate audit desk",
        version=package_version(),
        lifespan=lifespan,
        description="Audits of LLM answers by Markov-chain multi-agent debate, with human review. "
        "Authenticate with `Authorization: Bearer KEY` when the server has keys.",
    )
    app.state.store = store
    app.state.guard = guard
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(AllowedHosts, allowed=settings.allowed_hosts)  # added last: it runs first
    # before /static: a mount matches by prefix, in order
    app.mount("/static/swagger", StaticFiles(directory=_swagger_assets()), name="swagger")
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        return HTMLResponse(_DOCS_PAGE)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(_HERE / "static" / "favicon.ico", media_type="image/x-icon")

    def need(permission: Permission, *, page: bool = False) -> Any:
        def dependency(request: Request) -> Principal:
            if page and SESSION_COOKIE not in request.cookies and CSRF_COOKIE not in request.cookies:
                request.state.csrf_anchor = secrets.token_hex(16)  # a first visit: its forms need a CSRF anchor
            return guard.require(request, permission)

        return Depends(dependency)

    Reader = Annotated[Principal, need("read")]
    Submitter = Annotated[Principal, need("submit")]
    Reviewer = Annotated[Principal, need("review")]
    Exporter = Annotated[Principal, need("export")]
    Canceller = Annotated[Principal, need("cancel")]

    async def csrf(request: Request) -> None:
        await guard.check_csrf(request)

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError) -> Response:
        status = 404 if isinstance(exc, NotFoundError) else 409 if isinstance(exc, ConflictError) else 400
        if _wants_html(request):
            return _html_error(templates, request, status, str(exc))
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own handler echoes each bad input back, and an input that JSON cannot hold (a lone surrogate)
        # then turns a 422 into a 500. The field and what is wrong with it are enough.
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path", "header")) or "request"
        detail = f"{field}: {first['msg']}"
        if _wants_html(request):
            return _html_error(templates, request, 422, detail)
        return JSONResponse({"detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(SQLAlchemyError)
    async def _store_unavailable(request: Request, exc: SQLAlchemyError) -> Response:
        # A read-only or full disk, a database restarting: the request may succeed later, so 503, and the cause
        # (never a secret) instead of a bare 500.
        cause = settings.redact(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300])
        log.warning("audit store error on %s %s: %s", request.method, request.url.path, cause)
        message = f"the audit store cannot serve this request now ({cause}); try again shortly"
        if _wants_html(request):
            return _html_error(templates, request, 503, message)
        return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        if _wants_html(request):
            if exc.status_code == 401:
                return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
            return _html_error(templates, request, exc.status_code, str(exc.detail))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    # --- API: submitting ----------------------------------------------------------------------------------

    max_claims = settings.verifier.claims.max_claims

    def validated(request: AuditRequest) -> AuditRequest:
        try:
            request.overrides.apply(settings.verifier)
            checked_request(request, max_claims=max_claims)
        except ValidationError as exc:
            raise HTTPException(422, f"overrides: {exc.errors()[0]['msg']}") from exc
        except InputError as exc:
            raise HTTPException(422, str(exc)) from exc
        return request

    @app.post("/v1/audits", status_code=202, tags=["audits"], dependencies=[Depends(csrf)])
    def submit_audit(
        body: AuditRequest,
        response: Response,
        principal: Submitter,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Queue one response for audit; 202 with its id. Repeating an Idempotency-Key returns the first audit."""
        audit_id, created = store.submit(principal, validated(body), idempotency_key=idempotency_key)
        response.headers["Location"] = f"/v1/audits/{audit_id}"
        if not created:
            response.headers["Idempotent-Replayed"] = "true"
        return {"id": audit_id, "status": store.status(audit_id), "url": f"/v1/audits/{audit_id}"}

    async def batch_upload(request: Request, task: str, name: str | None, upload: StarletteUpload | None) -> BatchInfo:
        principal = guard.require(request, "submit")
        if task not in TASKS.names():
            raise HTTPException(422, f"task: unknown task {task!r}; choose one of: {', '.join(TASKS.names())}")
        if name is not None and len(name) > _NAME_LIMIT:
            raise HTTPException(422, f"name: at most {_NAME_LIMIT} characters")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "upload"
            if upload is not None:
                with path.open("wb") as out:
                    while chunk := await upload.read(1 << 20):
                        out.write(chunk)
                name = name or upload.filename or "upload"
            else:
                with path.open("wb") as out:
                    async for chunk in request.stream():
                        out.write(chunk)
            try:
                return await asyncio.to_thread(
                    ingest, path, store=store, principal=principal, task=task, name=(name or "upload")[:_NAME_LIMIT],
                    max_items=settings.max_batch_items, max_claims=max_claims,
                )  # fmt: skip
            except IngestError as exc:
                raise HTTPException(exc.status, str(exc)) from exc

    @app.post("/v1/batches", status_code=202, tags=["batches"], dependencies=[Depends(csrf)])
    async def submit_batch(
        request: Request, task: Annotated[str, Query()] = "qa", name: Annotated[str | None, Query()] = None
    ) -> BatchInfo:
        """Queue a JSONL or RefChecker JSON-array upload: a multipart `file` (with form fields `task`, `name`), or
        the raw body (Content-Type application/x-ndjson or application/json) with `?task=`. Unreadable lines are
        listed in `input_errors`; the others are queued."""
        upload: StarletteUpload | None = None
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            file = form.get("file")
            if not isinstance(file, StarletteUpload):
                raise HTTPException(422, "file: a multipart upload needs a `file` field")
            upload = file
            task = str(form.get("task") or task)
            name = str(form.get("name") or "") or name
        return await batch_upload(request, task, name, upload)

    @app.get("/v1/batches", tags=["batches"])
    def list_batches(_: Reader) -> list[BatchInfo]:
        """Recent batches with their progress."""
        return store.batches()

    @app.get("/v1/batches/{batch_id}", tags=["batches"])
    def get_batch(batch_id: RowId, _: Reader) -> BatchInfo:
        """A batch's progress (audits by status) and unreadable lines."""
        return store.batch(batch_id)

    @app.post("/v1/batches/{batch_id}/cancel", tags=["batches"], dependencies=[Depends(csrf)])
    def cancel_batch(batch_id: RowId, principal: Canceller) -> dict[str, Any]:
        """Cancel a batch's pending and running audits."""
        return {"cancelled": store.cancel_batch(batch_id, principal), "batch": store.batch(batch_id)}

    def stop_running(*audit_ids: int) -> None:
        """When this process's worker runs them, stop them now rather than at its next look at the store."""
        worker: Worker | None = getattr(app.state, "worker", None)
        if worker is None:
            return  # another process runs them: its next look at the store (every poll) stops them
        for audit_id in audit_ids:
            worker.stop_audit(audit_id)

    @app.post("/v1/audits/{audit_id}/retry", tags=["audits"], dependencies=[Depends(csrf)])
    def retry_audit(audit_id: RowId, principal: Submitter) -> dict[str, Any]:
        """Bring a failed audit back to the queue with its attempts reset (409 unless it failed)."""
        return {"id": audit_id, "status": store.retry(audit_id, principal)}

    @app.post("/v1/batches/{batch_id}/retry-failed", tags=["batches"], dependencies=[Depends(csrf)])
    def retry_failed_batch(batch_id: RowId, principal: Submitter) -> dict[str, Any]:
        """Bring a batch's failed audits back to the queue."""
        return {"requeued": store.retry_failed(principal, batch_id=batch_id), "batch": store.batch(batch_id)}

    @app.post("/v1/audits/{audit_id}/cancel", tags=["audits"], dependencies=[Depends(csrf)])
    def cancel_audit(audit_id: RowId, principal: Canceller) -> dict[str, Any]:
        """Cancel a pending or running audit (a finished one stays as it is)."""
        status = store.cancel(audit_id, principal)
        stop_running(audit_id)
        return {"id": audit_id, "status": status}

    # --- API: reading -------------------------------------------------------------------------------------

    @app.get("/v1/audits", tags=["audits"])
    def list_audits(
        _: Reader,
        verdict: Annotated[ReportVerdict | None, Query()] = None,
        task: Annotated[str | None, Query()] = None,
        status: Annotated[AuditStatus | None, Query()] = None,
        reviewed: Annotated[bool | None, Query()] = None,
        q: Annotated[str | None, Query(max_length=500)] = None,
        since: Annotated[datetime | None, Query()] = None,
        batch: Annotated[int | None, Query(ge=1, le=_ID_MAX)] = None,
        page: Annotated[int, Query(ge=1, le=_PAGE_MAX)] = 1,
        per_page: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> AuditPage:
        """Audits, newest first, by verdict, task, status, reviewed or not, text (`q`), creation time (`since`)."""
        return store.audits(
            verdict=verdict,
            task=task,
            status=status,
            reviewed=reviewed,
            q=q,
            since=_utc(since),
            batch_id=batch,
            page=page,
            per_page=per_page,
        )

    @app.get("/v1/audits/export", tags=["audits"])
    def export(
        _: Exporter, format: Annotated[Literal["jsonl", "csv", "refchecker"], Query()] = "jsonl"
    ) -> StreamingResponse:
        """Finished audits: jsonl (request, report as stored, reviews), csv (one row per claim with its latest
        review), refchecker (RefChecker's JSON array: claims, Y, ys)."""
        media = {"jsonl": "application/x-ndjson", "csv": "text/csv", "refchecker": "application/json"}[format]
        body = {"jsonl": _export_jsonl, "csv": _export_csv, "refchecker": _export_refchecker}[format](store)
        suffix = {"jsonl": "jsonl", "csv": "csv", "refchecker": "json"}[format]
        return StreamingResponse(
            body, media_type=media, headers={"Content-Disposition": f'attachment; filename="audits.{suffix}"'}
        )

    @app.get("/v1/audits/{audit_id}", tags=["audits"])
    def get_audit(audit_id: RowId, _: Reader) -> AuditDetail:
        """Status, request, the Report as the engine produced it, reviews and the trail."""
        return store.audit(audit_id)

    @app.get("/v1/audits/{audit_id}/report", tags=["audits"])
    def get_report(audit_id: RowId, _: Reader) -> Response:
        """The stored report, byte for byte (404 until the audit is done)."""
        stored = store.report_json(audit_id)
        if stored is None:
            raise HTTPException(404, f"audit {audit_id} has no report yet ({store.status(audit_id)})")
        return Response(stored, media_type="application/json")

    @app.post(
        "/v1/audits/{audit_id}/claims/{claim_id}/reviews",
        status_code=201,
        tags=["reviews"],
        dependencies=[Depends(csrf)],
    )
    def review_claim(audit_id: RowId, claim_id: str, body: ReviewIn, principal: Reviewer) -> ReviewInfo:
        """Confirm or overturn the engine's outcome on one claim (appended; the report is never changed)."""
        return store.add_review(audit_id, claim_id, principal, body)

    @app.get("/v1/review-queue", tags=["reviews"])
    def review_queue(
        _: Reviewer,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        sample: Annotated[float | None, Query(ge=0, le=1)] = None,
        seed: Annotated[int | None, Query()] = None,
    ) -> list[QueueItem]:
        """Unreviewed claims the engine did not find factual, then a seeded sample of its factual decisions
        (prefilter decisions included) for re-checking."""
        return store.review_queue(
            limit=limit,
            sample_rate=settings.queue_sample_rate if sample is None else sample,
            seed=settings.queue_seed if seed is None else seed,
        )

    @app.get("/v1/stats", tags=["stats"])
    def stats(_: Reader, bucket: Annotated[Literal["day", "week"], Query()] = "day") -> Stats:
        """Counts by status, verdict and task; agreement and Cohen's kappa between reviewers and the engine, in
        total and per period; model calls, tokens and cost."""
        return store.stats(bucket=bucket)

    @app.get("/v1/health", tags=["stats"])
    def health(response: Response) -> dict[str, Any]:
        """Whether audits are being processed: the store, the in-process worker's state and last error, the queue
        (pending audits that are due, the oldest one's wait, the last worker activity). 503 when the store does not
        answer, or when audits are due and no worker has made progress for `stall_s` seconds."""
        worker: Worker | None = getattr(app.state, "worker", None)
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
            return body | {
                "ok": False,
                "problem": f"{due} audit(s) due and no progress for {settings.stall_s:.0f} s ({why})",
            }
        return body | {"ok": True}

    # --- UI -----------------------------------------------------------------------------------------------

    def page(request: Request, name: str, principal: Principal, status_code: int = 200, **context: Any) -> HTMLResponse:
        response = templates.TemplateResponse(
            request,
            name,
            {
                "principal": principal,
                "csrf": guard.csrf_token(request),
                "auth_on": not guard.open,
                "worker_trouble": _trouble(getattr(app.state, "worker", None)),
                **context,
            },
            status_code=status_code,
        )
        anchor = getattr(request.state, "csrf_anchor", None)
        if anchor and CSRF_COOKIE not in request.cookies:
            response.set_cookie(CSRF_COOKIE, anchor, httponly=True, samesite="strict")
        return response

    UiReader = Annotated[Principal, need("read", page=True)]
    UiSubmitter = Annotated[Principal, need("submit", page=True)]
    UiReviewer = Annotated[Principal, need("review", page=True)]
    UiCanceller = Annotated[Principal, need("cancel", page=True)]

    @app.get("/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return templates.TemplateResponse(
            request, "login.html", {"next": _safe_next(next), "error": None, "principal": None, "auth_on": True}
        )

    @app.post("/login", include_in_schema=False)
    async def login(request: Request, key: Annotated[str, Form()], next: Annotated[str, Form()] = "/") -> Response:
        guard.check_origin(request)
        found = guard.login(key, request.client.host if request.client else "?")
        if found is None:
            return templates.TemplateResponse(
                request,
                "login.html",
                {"next": _safe_next(next), "error": "That key is not valid.", "principal": None, "auth_on": True},
                status_code=401,
            )
        response = RedirectResponse(_safe_next(next), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            guard.session_cookie(found),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            max_age=12 * 3600,
        )
        return response

    @app.post("/logout", include_in_schema=False, dependencies=[Depends(csrf)])
    def logout(request: Request) -> Response:
        # Ended here, not only in this browser: a copied cookie stops working too.
        session = guard.session_of(request.cookies.get(SESSION_COOKIE, ""))
        if session is not None:
            store.revoke_session(session[0], datetime.fromtimestamp(session[1], UTC).replace(tzinfo=None))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response

    @app.get("/", include_in_schema=False)
    def audits_page(
        request: Request,
        principal: UiReader,
        verdict: str = "",
        task: str = "",
        status: str = "",
        reviewed: str = "",
        q: str = "",
        page_number: Annotated[int, Query(alias="page", ge=1, le=_PAGE_MAX)] = 1,
    ) -> HTMLResponse:
        listing = store.audits(
            verdict=verdict or None,
            task=task or None,
            status=status or None,
            reviewed={"yes": True, "no": False}.get(reviewed),
            q=q or None,
            page=page_number,
            per_page=25,
        )
        filters = {"verdict": verdict, "task": task, "status": status, "reviewed": reviewed, "q": q}
        return page(request, "audits.html", principal, listing=listing, filters=filters)

    @app.get("/audits/{audit_id}", include_in_schema=False)
    def audit_page(request: Request, audit_id: RowId, principal: UiReader) -> HTMLResponse:
        detail = store.audit(audit_id)
        latest: dict[str, ReviewInfo] = {r.claim_id: r for r in detail.reviews}
        claims = []
        shown: list[Segment] = []
        verdict_after_review = None
        if detail.report is not None:
            diagrams = chain_diagrams(detail.report)
            reviewed = reviewed_claims(detail.report, latest)
            for claim, final in zip(detail.report.claims, reviewed, strict=True):
                review = latest.get(claim.claim_id)
                claims.append(
                    {
                        "verdict": claim,
                        "label": claim_label(final),
                        "engine_label": claim_label(claim),
                        "review": review,
                        "overturned": review is not None and review.decision == "overturn",
                        "diagram": diagrams[claim.claim_id],
                    }
                )
            shown = segments(detail.report, reviewed)
            verdict_after_review = reviewed_verdict(detail.report, latest)
        return page(
            request,
            "audit.html",
            principal,
            audit=detail,
            claims=claims,
            segments=shown,
            present=sorted({seg.label for seg in shown if seg.label}),
            verdict_after_review=verdict_after_review,
            cost=detail.cost,
            priced=settings.priced,
            labels=["factual", "non_factual", "not_enough_evidence"],
        )

    @app.post("/audits/{audit_id}/claims/{claim_id}/review", include_in_schema=False, dependencies=[Depends(csrf)])
    def review_form(
        request: Request,
        principal: UiReviewer,
        audit_id: RowId,
        claim_id: str,
        decision: Annotated[Literal["confirm", "overturn"], Form()],
        label: Annotated[str, Form()] = "",
        note: Annotated[str, Form(max_length=5000)] = "",
        back: Annotated[str, Form()] = "",
    ) -> Response:
        chosen = cast(ClaimLabel, label) if label in ("factual", "non_factual", "not_enough_evidence") else None
        store.add_review(audit_id, claim_id, principal, ReviewIn(decision=decision, label=chosen, note=note))
        target = _safe_next(back) if back else f"/audits/{audit_id}#claim-{claim_id}"
        return RedirectResponse(target, status_code=303)

    @app.post("/audits/{audit_id}/cancel", include_in_schema=False, dependencies=[Depends(csrf)])
    def cancel_form(audit_id: RowId, principal: UiCanceller) -> Response:
        store.cancel(audit_id, principal)
        stop_running(audit_id)
        return RedirectResponse(f"/audits/{audit_id}", status_code=303)

    @app.get("/queue", include_in_schema=False)
    def queue_page(request: Request, principal: UiReviewer) -> HTMLResponse:
        items = store.review_queue(limit=100, sample_rate=settings.queue_sample_rate, seed=settings.queue_seed)
        return page(
            request, "queue.html", principal, items=items, labels=["factual", "non_factual", "not_enough_evidence"]
        )

    @app.get("/dashboard", include_in_schema=False)
    def dashboard_page(request: Request, principal: UiReader) -> HTMLResponse:
        figures = store.stats()
        return page(
            request,
            "dashboard.html",
            principal,
            stats=figures,
            plot=bool(figures.over_time),
            priced=settings.priced,
        )

    @app.get("/dashboard/agreement.png", include_in_schema=False)
    def agreement_plot(principal: UiReader) -> Response:
        return Response(
            agreement_png(store.stats().over_time), media_type="image/png", headers={"Cache-Control": "no-store"}
        )

    @app.get("/submit", include_in_schema=False)
    def submit_page(request: Request, principal: UiSubmitter) -> HTMLResponse:
        return page(request, "submit.html", principal, error=None, form={})

    @app.post("/submit", include_in_schema=False, dependencies=[Depends(csrf)])
    def submit_form(
        request: Request,
        principal: UiSubmitter,
        response_text: Annotated[str, Form(alias="response")],
        task: Annotated[str, Form()] = "qa",
        question: Annotated[str, Form()] = "",
        reference: Annotated[str, Form()] = "",
    ) -> Response:
        form = {"task": task, "question": question, "reference": reference, "response": response_text}
        try:
            body = validated(
                AuditRequest(
                    task=task,
                    question=question or None,
                    response=response_text,
                    reference=reference or None,
                    overrides=AuditOverrides(),
                )
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            message = f"{'.'.join(map(str, first['loc'])) or 'form'}: {first['msg']}"
            return page(request, "submit.html", principal, error=message, form=form)
        audit_id, _ = store.submit(principal, body)
        return RedirectResponse(f"/audits/{audit_id}", status_code=303)

    @app.post("/batches", include_in_schema=False, dependencies=[Depends(csrf)])
    async def batch_form(
        request: Request,
        principal: UiSubmitter,
        file: UploadFile,
        task: Annotated[str, Form()] = "",
        name: Annotated[str, Form()] = "",
    ) -> Response:
        if not task:
            # A batch runs every line under one task: guessing one (the first in a list) ran QA files as dialogue.
            return page(request, "submit.html", principal, error="task: choose the task of the batch's lines",
                        form={"batch_name": name}, status_code=422)  # fmt: skip
        info = await batch_upload(request, task, name or None, file)
        return RedirectResponse(f"/batches/{info.id}", status_code=303)

    @app.get("/batches/{batch_id}", include_in_schema=False)
    def batch_page(request: Request, batch_id: RowId, principal: UiReader) -> HTMLResponse:
        info = store.batch(batch_id)
        listing = store.audits(batch_id=batch_id, per_page=200)
        return page(request, "batch.html", principal, batch=info, listing=listing)

    return app


def _report_worker_exit(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the in-process worker stopped; audits wait for another worker", exc_info=task.exception())


def _wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/v1/") and "text/html" in request.headers.get("accept", "text/html")


def _html_error(templates: Jinja2Templates, request: Request, status: int, message: str) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        "error.html",
        {"status": status, "message": message, "principal": None, "auth_on": False},
        status_code=status,
    )


def _safe_next(target: str) -> str:
    # Only a path on this site: an open redirect would let a link send a signed-in reviewer anywhere.
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def _export_jsonl(store: Store) -> Iterator[str]:
    for row, reviews in store.export_rows():
        yield (
            json.dumps(
                {
                    "audit_id": row.id,
                    "submitted_by": row.submitted_by,
                    "created_at": row.created_at.isoformat() + "Z",
                    "request": json.loads(row.request_json),
                    "report": json.loads(row.report_json or "null"),
                    "reviews": [
                        {
                            "claim_id": r.claim_id,
                            "reviewer": r.reviewer,
                            "created_at": r.created_at.isoformat() + "Z",
                            "decision": r.decision,
                            "label": r.label,
                            "engine_label": r.engine_label,
                            "note": r.note,
                        }
                        for r in reviews
                    ],
                },
                ensure_ascii=False,
            )
            + "\n"
        )


_CSV_FIELDS = [
    "audit_id",
    "task",
    "verdict",
    "claim_id",
    "claim",
    "engine_label",
    "decided_by",
    "error_severity",
    "review_decision",
    "review_label",
    "reviewer",
    "reviewed_at",
    "review_note",
]


def _export_csv(store: Store) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_CSV_FIELDS)
    writer.writeheader()
    for row, reviews in store.export_rows():
        latest = {r.claim_id: r for r in reviews}
        for claim in json.loads(row.report_json or "{}").get("claims", []):
            review = latest.get(claim["claim_id"])
            writer.writerow(
                {
                    "audit_id": row.id,
                    "task": row.task,
                    "verdict": row.verdict,
                    "claim_id": claim["claim_id"],
                    "claim": claim["text"],
                    "engine_label": engine_label(claim),
                    "decided_by": claim.get("decided_by", "debate"),
                    "error_severity": claim.get("error_severity"),
                    "review_decision": review.decision if review else "",
                    "review_label": review.label if review else "",
                    "reviewer": review.reviewer if review else "",
                    "reviewed_at": review.created_at.isoformat() + "Z" if review else "",
                    "review_note": review.note if review else "",
                }
            )
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def _export_refchecker(store: Store) -> Iterator[str]:
    yield "["
    first = True
    for row, _ in store.export_rows():
        request = json.loads(row.request_json)
        record = {
            "id": str(row.id),
            **{k: request[k] for k in ("question", "response", "reference", "claims") if request.get(k) is not None},
            "result": json.loads(row.report_json or "null"),
        }
        yield ("" if first else ",\n") + json.dumps(refchecker_item(record), ensure_ascii=False)
        first = False
    yield "]\n"
