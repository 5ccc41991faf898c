"""The desk's FastAPI app, wired: the store, the guard and the templates in the app's state; the middleware (Host
allow-list, body limit, security headers); one error model for every route; the routers (`routes/*` for the JSON API
under /v1, `ui.py` for the pages); and the in-process worker for the app's lifetime."""

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import DataError, SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from debate.plugins import TASKS
from debate.provenance import package_version
from debate.results import severity_text
from debate.types import ReportVerdict
from markov_debate.desk.bodies import PARSE_FAILED, body_problem, json_syntax_problem
from markov_debate.desk.deps import html_error, wants_html
from markov_debate.desk.gate import (
    LOGIN_BODY_BYTES,
    PUBLIC_BODIES,
    BodyBudget,
    CallerGate,
    HeadAndOptions,
    allowed_methods,
)
from markov_debate.desk.metrics import HttpMetrics, Readings
from markov_debate.desk.models import GuardAction
from markov_debate.desk.openapi import publish
from markov_debate.desk.problems import ERROR_RESPONSES
from markov_debate.desk.quotas import UPLOADING, Quotas
from markov_debate.desk.readings import desk_readings
from markov_debate.desk.routes import audits, batches, reviews, stats
from markov_debate.desk.security import FORM_LIMITS, AllowedHosts, BodyLimit, Guard, NoNul, SecurityHeaders
from markov_debate.desk.serving import Every
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import (
    CancelledReplayError,
    ConflictError,
    NotFoundError,
    PendingLimitError,
    ReviewConflictError,
    Store,
    StoreError,
)
from markov_debate.desk.store.db import store_away, store_cause
from markov_debate.desk.ui import STATIC, swagger_assets
from markov_debate.desk.ui import router as ui_router
from markov_debate.desk.uploads import UploadPool
from markov_debate.desk.worker import Worker

__all__ = ["create_app"]

log = logging.getLogger(__name__)
_TEMPLATES = STATIC.parent / "templates"


_TEMPLATE_GLOBALS = {"verdicts": get_args(ReportVerdict), "guard_actions": get_args(GuardAction)}


def create_app(settings: DeskSettings, *, store: Store | None = None) -> FastAPI:
    """The app over `store` (opened from settings.db_url when not given)."""
    store = store or Store(
        settings.db_url,
        price_prompt_per_mtok=settings.price_prompt_per_mtok,
        price_completion_per_mtok=settings.price_completion_per_mtok,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        if settings.jobs > 0:
            worker = Worker(store, settings)
            app.state.worker = worker
            task = asyncio.create_task(worker.run(stop), name="desk-worker")
            task.add_done_callback(_report_worker_exit)
        # What start-up built (modules, the app, templates) lives as long as the process: out of the collector's
        # reach, a full collection no longer walks it, which took requests from a few ms to ~100 ms now and then.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                await asyncio.wait([task])  # its failure, if any, was logged by _report_worker_exit
            await asyncio.to_thread(app.state.uploads.close)

    app = FastAPI(
        docs_url=None,  # served by markov_debate.desk.ui from packaged assets, so /docs works offline and under our CSP
        redoc_url=None,
        title="markov-debate audit desk",
        version=package_version(),
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        form_limits=FORM_LIMITS,
        description="Audits of LLM answers by Markov-chain multi-agent debate, with human review. "
        "Authenticate with `Authorization: Bearer KEY` when the server has keys.",
    )
    app.state.store = store
    app.state.settings = settings
    app.state.templates = _templates()
    app.state.uploads = UploadPool(store.url, settings, processes=min(2, settings.max_uploads))
    app.state.guard = Guard(settings.keys, settings.session_secret, revoked=store.session_revoked)
    _middleware(app, settings)
    # before /static: a mount matches by prefix, in order
    app.mount("/static/swagger", StaticFiles(directory=swagger_assets()), name="swagger")
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    _error_model(app, settings)
    _quiet_disconnects(app)
    publish(app, settings)
    for router in (audits.router, batches.router, reviews.router, stats.router, stats.probes, ui_router):
        app.include_router(router)
    return app


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(_TEMPLATES))
    templates.env.autoescape = True  # every template, whatever its name: nothing a user or model wrote is markup
    templates.env.filters["severity"] = severity_text
    templates.env.globals.update(_TEMPLATE_GLOBALS, version=package_version(), tasks=TASKS.names())
    return templates


def _middleware(app: FastAPI, settings: DeskSettings) -> None:
    """Request metrics and security headers on every answer; Host allow-list, NUL refusal, the caller (a body from
    nobody refused unread), quotas, the budget of bodies in flight, the body limit (the last added runs first)."""
    app.state.metrics = CollectorRegistry()
    app.state.metrics.register(Readings(lambda: desk_readings(app)))
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, small={p: LOGIN_BODY_BYTES for p in PUBLIC_BODIES})
    app.add_middleware(BodyBudget, limit=settings.max_bodies_in_flight_bytes, streamed=UPLOADING)
    # before anything reads a body (the body limit buffers a chunked one): a refused upload holds no file or memory
    app.add_middleware(Quotas, settings=settings, guard=app.state.guard)
    app.add_middleware(CallerGate, guard=app.state.guard, uploads=UPLOADING)
    app.add_middleware(HeadAndOptions, routes=lambda: app.router.routes)
    app.add_middleware(NoNul)
    app.add_middleware(AllowedHosts, allowed=settings.allowed_hosts)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(HttpMetrics, registry=app.state.metrics, prefix="desk")


def _error_model(app: FastAPI, settings: DeskSettings) -> None:
    """Every failure as a status that says what happened: JSON with a `detail` naming the field for the API, the
    error page for the UI; never a bare 500 for something the caller or the store did."""

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError) -> Response:
        status = 404 if isinstance(exc, NotFoundError) else 409 if isinstance(exc, ConflictError) else 400
        if isinstance(exc, ReviewConflictError):
            return _review_conflict(request, exc)
        if isinstance(exc, PendingLimitError):
            return _error(request, 429, str(exc), headers={"Retry-After": str(exc.retry_after_s)})
        if isinstance(exc, CancelledReplayError) and not wants_html(request):
            return JSONResponse({"detail": str(exc), "id": exc.audit_id, "status": "cancelled"}, status_code=409)
        return _error(request, status, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own handler echoes each bad input back, and an input that JSON cannot hold (a lone surrogate)
        # then turns a 422 into a 500. The field and what is wrong with it are enough.
        errors = [
            {"loc": [_bounded_part(p) for p in e["loc"]][:12], "msg": _bounded(e["msg"]), "type": e["type"]}
            for e in exc.errors()[:20]
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path", "header")) or "request"
        detail, status = f"{field}: {first['msg']}", 422
        if first.get("type") == "json_invalid":
            # A body that is not JSON is a 400, as every other body that does not parse (not UTF-8, too deep).
            position = first["loc"][-1] if isinstance(first["loc"][-1], int) else 0
            reason = str((exc.errors()[0].get("ctx") or {}).get("error", "JSON decode error"))
            detail, status = json_syntax_problem(await request.body(), position, reason), 400
        if wants_html(request):
            return html_error(request, status, detail)
        return JSONResponse({"detail": detail, "errors": errors}, status_code=status)

    app.exception_handler(SQLAlchemyError)(_store_failed(settings))

    # Starlette's class, which FastAPI's subclasses: FastAPI raises Starlette's own for a body it cannot parse
    # and for unknown routes, and those must get this handler too.
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if wants_html(request) and exc.status_code == 401:
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        if exc.status_code == 400 and exc.detail == PARSE_FAILED:
            return _error(request, 400, body_problem(await request.body(), exc.__cause__))
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path; a path with a GET and a POST
            # route must name both.
            allowed = ", ".join(allowed_methods(app.router.routes, request.scope))
            return _error(request, 405, exc.detail, headers={"Allow": allowed})
        return _error(request, exc.status_code, exc.detail, headers=exc.headers)


def _store_failed(settings: DeskSettings) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The answer to a store error: 503 with Retry-After while the store is away, 422 for a value it cannot hold,
    500 otherwise. The cause is the operator's (it names the database's host and port): in the log, once a while
    with a count during an outage (every request meets it), never in the answer."""
    reports = Every(10.0)

    async def handler(request: Request, exc: Exception) -> Response:
        cause = settings.redact(store_cause(exc))
        if (count := reports.due()) is not None:
            where = f"{request.method} {request.url.path}"
            log.warning("audit store error (the last on %s: %s; %d time(s) since the last report)", where, cause, count)
        if store_away(exc):
            # A database restarting, a read-only or full disk: the request may succeed later.
            message = "the audit store cannot take this request now; try again shortly"
            return _error(request, 503, message, headers={"Retry-After": "5"})
        if isinstance(exc, DataError):
            # The store refused this request's data (a value out of range): sending it again cannot help.
            return _error(request, 422, "the audit store cannot hold a value of this request")
        return _error(request, 500, "the audit store refused this request (the desk's log says why)")

    return handler


def _bounded(message: str, limit: int = 500) -> str:
    """A validation message as the answer carries it: whole when short, else its start and its length (a message
    may quote a value the client sent, and the answer is not the place to send 100 KB back)."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message):,} characters)"


def _bounded_part(part: object) -> object:
    """A field name as an error names it: a key the client made up can be a megabyte long."""
    return part if not isinstance(part, str) or len(part) <= 80 else f"{part[:60]}... ({len(part):,} characters)"


def _quiet_disconnects(app: FastAPI) -> None:
    """A client that closes its connection before its body is in (a cut-off upload, an impatient script) leaves
    nothing to answer and nothing broken here: one log line a while, not a 5 KB traceback each."""
    disconnects = Every(30.0)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(request: Request, exc: ClientDisconnect) -> Response:
        count = disconnects.due()
        if count is not None:
            log.info(
                "a client closed its connection before sending its whole request body (%s %s; %d time(s) since "
                "the last report)",
                request.method,
                request.url.path,
                count,
            )
        return Response(status_code=400)  # never delivered: for the access log


def _review_conflict(request: Request, exc: ReviewConflictError) -> Response:
    """409 with the label as it now stands, so a client can show it; the page links back to the claim."""
    if wants_html(request):
        back = (f"/audits/{exc.audit_id}#claim-{exc.claim_id}", "Back to the claim, as it now stands")
        return html_error(request, 409, str(exc), back=back)
    body = {"detail": str(exc), "current_label": exc.current_label, "reviewed_by": exc.reviewed_by}
    return JSONResponse(body, status_code=409)


def _error(request: Request, status: int, detail: object, headers: Mapping[str, str] | None = None) -> Response:
    if wants_html(request):
        return html_error(request, status, str(detail), headers)
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _report_worker_exit(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the in-process worker stopped; audits wait for another worker", exc_info=task.exception())
