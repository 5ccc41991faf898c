"""What the desk's routes receive as FastAPI dependencies: the store, the settings and the in-process worker (from
the app's state, so every route is importable and testable on its own), who is asking and whether they may
(auth), the CSRF check, validated ids, and the page renderer the UI shares."""

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi import Path as FastPath
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from debate.errors import InputError
from markov_debate.desk.auth import Permission, Principal
from markov_debate.desk.requests import AuditRequest, checked_request
from markov_debate.desk.runnable import check_runnable
from markov_debate.desk.security import CSRF_COOKIE, SESSION_COOKIE, Guard
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import Store
from markov_debate.desk.store.visibility import hidden_in_text
from markov_debate.desk.worker import Worker

__all__ = [
    "ID_MAX",
    "PAGE_MAX",
    "Canceller",
    "Exporter",
    "GuardDep",
    "Reader",
    "Reviewer",
    "RowId",
    "SettingsDep",
    "StoreDep",
    "Submitter",
    "UiCanceller",
    "UiReader",
    "UiReviewer",
    "UiSubmitter",
    "csrf",
    "html_error",
    "render",
    "safe_next",
    "stop_running",
    "utc",
    "validated",
    "wants_html",
    "worker_of",
]

ID_MAX = 2**31 - 1
"""Largest audit or batch id any store holds (PostgreSQL's integer); a larger one is a 422, not a database error."""
PAGE_MAX = 1_000_000
RowId = Annotated[int, FastPath(ge=1, le=ID_MAX)]


async def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


async def _settings(request: Request) -> DeskSettings:
    settings: DeskSettings = request.app.state.settings
    return settings


def _guard(request: Request) -> Guard:
    guard: Guard = request.app.state.guard
    return guard


async def _guard_dep(request: Request) -> Guard:
    return _guard(request)


# A sync dependency takes a thread of the routes' pool for each request: these lookups are async so that a burst
# of requests does not spend the pool on them.
StoreDep = Annotated[Store, Depends(_store)]
SettingsDep = Annotated[DeskSettings, Depends(_settings)]
GuardDep = Annotated[Guard, Depends(_guard_dep)]


def worker_of(request: Request) -> Worker | None:
    """The worker this process runs (None with `--jobs 0`: other processes do the work)."""
    worker: Worker | None = getattr(request.app.state, "worker", None)
    return worker


def need(permission: Permission, *, page: bool = False) -> Any:
    """A dependency that answers 401/403 unless the request may do `permission`; its value is the principal."""

    def dependency(request: Request) -> Principal:
        if page and SESSION_COOKIE not in request.cookies and CSRF_COOKIE not in request.cookies:
            request.state.csrf_anchor = secrets.token_hex(16)  # a first visit: its forms need a CSRF anchor
        return _guard(request).require(request, permission)

    return Depends(dependency)


Reader = Annotated[Principal, need("read")]
Submitter = Annotated[Principal, need("submit")]
Reviewer = Annotated[Principal, need("review")]
Exporter = Annotated[Principal, need("export")]
Canceller = Annotated[Principal, need("cancel")]
UiReader = Annotated[Principal, need("read", page=True)]
UiSubmitter = Annotated[Principal, need("submit", page=True)]
UiReviewer = Annotated[Principal, need("review", page=True)]
UiCanceller = Annotated[Principal, need("cancel", page=True)]


async def csrf(request: Request) -> None:
    """Refuses a state change a browser could have been tricked into (see Guard.check_csrf)."""
    await _guard(request).check_csrf(request)


def validated(request: AuditRequest, settings: DeskSettings) -> AuditRequest:
    """A submitted request checked as the worker will need it: its overrides apply to the server's configuration,
    and it can be stored and read back (limits, text); 422 naming the field otherwise."""
    try:
        config = request.overrides.apply(settings.verifier)
        checked_request(request, max_claims=settings.verifier.claims.max_claims)
        check_runnable(request, config, max_claim_chars=settings.max_claim_chars)
    except ValidationError as exc:
        raise HTTPException(422, f"overrides: {exc.errors()[0]['msg']}") from exc
    except InputError as exc:
        raise HTTPException(422, str(exc)) from exc
    return request


def utc(since: datetime | None) -> datetime | None:
    """`since` as naive UTC, the store's clock; an offset that moves it out of the calendar is the caller's error."""
    if since is None or since.tzinfo is None:
        return since
    try:
        return since.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError) as exc:
        raise HTTPException(422, f"since: {since.isoformat()} is out of range in UTC") from exc


def stop_running(request: Request, *audit_ids: int) -> None:
    """When this process's worker runs them, stop them now rather than at its next look at the store."""
    worker = worker_of(request)
    if worker is None:
        return  # another process runs them: its next look at the store (every poll) stops them
    for audit_id in audit_ids:
        worker.stop_audit(audit_id)


def _trouble(worker: Worker | None, principal: Principal) -> str | None:
    """What a page's banner says while the in-process worker waits for the endpoint or the store (to a submitter,
    without the endpoint's address)."""
    if worker is None or worker.state not in ("endpoint-down", "store-unavailable"):
        return None
    cause = hidden_in_text(worker.last_error) if principal.role == "submitter" else worker.last_error
    return f"{cause}. Audits wait in the queue, keep their attempts, and resume when it is back."


def render(request: Request, name: str, principal: Principal, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A UI page: the template with who is signed in, the CSRF token, the outage banner, and `context`."""
    guard = _guard(request)
    templates: Jinja2Templates = request.app.state.templates
    response = templates.TemplateResponse(
        request,
        name,
        {
            "principal": principal,
            "csrf": guard.csrf_token(request),
            "auth_on": not guard.open,
            "worker_trouble": _trouble(worker_of(request), principal),
            **context,
        },
        status_code=status_code,
    )
    anchor = getattr(request.state, "csrf_anchor", None)
    if anchor and CSRF_COOKIE not in request.cookies:
        response.set_cookie(CSRF_COOKIE, anchor, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


def wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/v1/") and "text/html" in request.headers.get("accept", "text/html")


def html_error(
    request: Request,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    back: tuple[str, str] = ("/", "Back to the audits"),
) -> HTMLResponse:
    """The error page; `headers` (a 429's Retry-After, a 401's WWW-Authenticate) are kept; `back`: the link
    (a site path) and its text."""
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(
        request,
        "error.html",
        {"status": status, "message": message, "principal": None, "auth_on": False, "back": back},
        status_code=status,
        headers=dict(headers) if headers else None,
    )


def safe_next(target: str) -> str:
    # Only a path on this site: an open redirect would let a link send a signed-in reviewer anywhere.
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
