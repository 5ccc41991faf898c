"""The web UI: sign in and out, the audit list and page, the review queue, the dashboard, the submit and upload
forms, a batch's progress; and the API reference at /docs (served from packaged files, so it works offline)."""

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, cast, get_args

from fastapi import APIRouter, Depends, Form, Query, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from debate.errors import UsageError
from debate.extras import install_command
from debate.types import ClaimLabel
from markov_debate.desk.bodies import OffLoopJson
from markov_debate.desk.calibrated import calibration_panel, label_next
from markov_debate.desk.deps import (
    ID_MAX,
    PAGE_MAX,
    GuardDep,
    RowId,
    SettingsDep,
    StoreDep,
    UiCanceller,
    UiReader,
    UiReviewer,
    UiSubmitter,
    csrf,
    render,
    safe_next,
    stop_running,
    validated,
)
from markov_debate.desk.models import EngineLabel, ReviewIn, ReviewInfo
from markov_debate.desk.requests import AuditOverrides, AuditRequest, StorableText
from markov_debate.desk.routes.batches import upload_batch
from markov_debate.desk.security import SESSION_COOKIE
from markov_debate.desk.stats import stats as compute_stats
from markov_debate.desk.store.db import ConflictError
from markov_debate.desk.store.reviews import Ask, QueueOrder
from markov_debate.desk.views import (
    Segment,
    agreement_png,
    chain_diagrams,
    claim_label,
    reliability_png,
    reviewed_claims,
    segments,
)

__all__ = ["STATIC", "router", "swagger_assets"]

router = APIRouter(include_in_schema=False, route_class=OffLoopJson)
STATIC = Path(__file__).parent / "static"
_LABELS: list[str] = list(get_args(ClaimLabel))

_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>markov-debate audit desk: API</title>
<link rel="icon" href="/favicon.ico"><link rel="stylesheet" href="/static/swagger/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script><script src="/static/docs.js"></script></body></html>
"""
"""The API reference page: Swagger UI's packaged assets and our own start-up script (no CDN, no inline script)."""


def swagger_assets() -> Path:
    """Swagger UI's files as the fastapi-offline package ships them (found, not imported: we use only its assets)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise UsageError(f"the desk's /docs needs fastapi-offline: {install_command('desk')}")
    return Path(spec.origin).parent / "static"


@router.get("/docs")
def api_docs() -> HTMLResponse:
    return HTMLResponse(_DOCS_PAGE)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon")


def _login_page(request: Request, next_url: str, error: str | None, status_code: int = 200) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.templates
    context = {"next": safe_next(next_url), "error": error, "principal": None, "auth_on": True}
    return templates.TemplateResponse(request, "login.html", context, status_code=status_code)


@router.get("/login")
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return _login_page(request, next, None)


@router.post("/login")
async def login(
    request: Request, guard: GuardDep, key: Annotated[str, Form()], next: Annotated[str, Form()] = "/"
) -> Response:
    guard.check_origin(request)
    found = guard.login(key, request.client.host if request.client else "?")
    if found is None:
        return _login_page(request, next, "That key is not valid.", status_code=401)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        guard.session_cookie(found),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=12 * 3600,
    )
    return response


@router.post("/logout", dependencies=[Depends(csrf)])
def logout(request: Request, guard: GuardDep, store: StoreDep) -> Response:
    # Ended here, not only in this browser: a copied cookie stops working too.
    session = guard.session_of(request.cookies.get(SESSION_COOKIE, ""))
    if session is not None:
        store.revoke_session(session[0], datetime.fromtimestamp(session[1], UTC).replace(tzinfo=None))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.get("/")
def audits_page(
    request: Request,
    principal: UiReader,
    store: StoreDep,
    verdict: str = "",
    task: str = "",
    status: str = "",
    reviewed: str = "",
    q: str = "",
    guard: str = "",
    page_number: Annotated[int, Query(alias="page", ge=1, le=PAGE_MAX)] = 1,
    before: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
) -> HTMLResponse:
    listing = store.audits(
        owner=principal.owner,
        verdict=verdict or None,
        task=task or None,
        status=status or None,
        reviewed={"yes": True, "no": False}.get(reviewed),
        q=q or None,
        guard_action=guard or None,
        page=page_number,
        per_page=25,
        before=before,
    )
    filters = {"verdict": verdict, "task": task, "status": status, "reviewed": reviewed, "q": q, "guard": guard}
    paged = before is not None or page_number > 1
    return render(request, "audits.html", principal, listing=listing, filters=filters, paged=paged)


@router.get("/audits/{audit_id}")
def audit_page(
    request: Request, audit_id: RowId, principal: UiReader, store: StoreDep, settings: SettingsDep
) -> HTMLResponse:
    """An audit, with each claim as it now stands: a reviewer's overturn leads the badge, highlight and table."""
    detail = store.audit(audit_id, owner=principal.owner)
    latest: dict[str, ReviewInfo] = {r.claim_id: r for r in detail.reviews}
    claims = []
    shown: list[Segment] = []
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
    # The audit's verdict as reviewed is stored with each review (detail.reviewed_verdict); audit_badge shows it.
    return render(
        request,
        "audit.html",
        principal,
        audit=detail,
        claims=claims,
        segments=shown,
        present=sorted({seg.label for seg in shown if seg.label}),
        cost=detail.cost,
        priced=settings.priced,
        labels=_LABELS,
    )


@router.post("/audits/{audit_id}/claims/{claim_id}/review", dependencies=[Depends(csrf)])
def review_form(
    principal: UiReviewer,
    store: StoreDep,
    audit_id: RowId,
    claim_id: str,
    decision: Annotated[Literal["confirm", "overturn"], Form()],
    label: Annotated[str, Form()] = "",
    note: Annotated[StorableText, Form(max_length=5000)] = "",
    back: Annotated[str, Form()] = "",
    seen_label: Annotated[EngineLabel | None, Form()] = None,
) -> Response:
    chosen = cast(ClaimLabel, label) if label in _LABELS else None
    review = ReviewIn(decision=decision, label=chosen, note=note, seen_label=seen_label)
    store.add_review(audit_id, claim_id, principal, review)
    target = safe_next(back) if back else f"/audits/{audit_id}#claim-{claim_id}"
    return RedirectResponse(target, status_code=303)


@router.post("/audits/{audit_id}/cancel", dependencies=[Depends(csrf)])
def cancel_form(request: Request, audit_id: RowId, principal: UiCanceller, store: StoreDep) -> Response:
    store.cancel(audit_id, principal)
    stop_running(request, audit_id)
    return RedirectResponse(f"/audits/{audit_id}", status_code=303)


@router.get("/queue")
def queue_page(
    request: Request, principal: UiReviewer, store: StoreDep, settings: SettingsDep, order: QueueOrder = "oldest"
) -> HTMLResponse:
    asks: list[Ask] = []
    notice = None
    if order == "label-next":
        try:
            asks = label_next(settings.verifier.debate.calibration)
        except ConflictError as exc:
            # the page still serves the queue; it says why it is not in the order asked for
            notice, order = str(exc), "oldest"
    items = store.review_queue(
        limit=100, sample_rate=settings.queue_sample_rate, seed=settings.queue_seed, order=order, asks=asks
    )
    return render(request, "queue.html", principal, items=items, labels=_LABELS, order=order, notice=notice)


@router.get("/dashboard")
def dashboard_page(request: Request, principal: UiReader, store: StoreDep, settings: SettingsDep) -> HTMLResponse:
    figures = compute_stats(store, owner=principal.owner)
    panel = calibration_panel(store, settings.verifier.debate.calibration, owner=principal.owner)
    return render(
        request,
        "dashboard.html",
        principal,
        stats=figures,
        plot=bool(figures.over_time),
        priced=settings.priced,
        several_models=bool(settings.verifier.roles or settings.verifier.debate.cascade),
        calibration=panel,
    )


@router.get("/dashboard/reliability.png")
def reliability_plot(principal: UiReader, store: StoreDep, settings: SettingsDep) -> Response:
    panel = calibration_panel(store, settings.verifier.debate.calibration, owner=principal.owner)
    bins = tuple(panel.reviewed.bins) if panel is not None and panel.reviewed is not None else ()
    return Response(reliability_png(bins), media_type="image/png", headers={"Cache-Control": "no-store"})


@router.get("/dashboard/agreement.png")
def agreement_plot(principal: UiReader, store: StoreDep) -> Response:
    png = agreement_png(compute_stats(store, owner=principal.owner).over_time)
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})


@router.get("/submit")
def submit_page(request: Request, principal: UiSubmitter) -> HTMLResponse:
    return render(request, "submit.html", principal, error=None, form={})


@router.post("/submit", dependencies=[Depends(csrf)])
def submit_form(
    request: Request,
    principal: UiSubmitter,
    store: StoreDep,
    settings: SettingsDep,
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
            ),
            settings,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        message = f"{'.'.join(map(str, first['loc'])) or 'form'}: {first['msg']}"
        return render(request, "submit.html", principal, error=message, form=form)
    audit_id, _ = store.submit(principal, body, max_pending=request.app.state.settings.key_max_pending)
    return RedirectResponse(f"/audits/{audit_id}", status_code=303)


@router.post("/batches", dependencies=[Depends(csrf)])
async def batch_form(
    request: Request,
    principal: UiSubmitter,
    file: UploadFile,
    task: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
) -> Response:
    if not task:
        # A batch runs every line under one task: guessing one (the first in a list) ran QA files as dialogue.
        return render(
            request,
            "submit.html",
            principal,
            error="task: choose the task of the batch's lines",
            form={"batch_name": name},
            status_code=422,
        )
    info, _ = await upload_batch(request, task, name or None, file)
    return RedirectResponse(f"/batches/{info.id}", status_code=303)


@router.get("/batches/{batch_id}")
def batch_page(request: Request, batch_id: RowId, principal: UiReader, store: StoreDep) -> HTMLResponse:
    info = store.batch(batch_id, owner=principal.owner)
    listing = store.audits(batch_id=batch_id, per_page=200)
    return render(request, "batch.html", principal, batch=info, listing=listing)
