"""The guard's FastAPI app: `POST /v1/chat/completions` and `GET /v1/models` (also under `/route/<name>/v1/...`,
which picks a route's settings), `GET /healthz`. A request passes upstream unchanged (without its `sources`); the
answer is verified against the sources it carried and returned, annotated, flagged or blocked as its policy says;
every decision goes to the desk's store."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, get_args

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from debate import telemetry
from markov_debate.desk.metrics import HttpMetrics, Reading, Readings, metrics_response
from markov_debate.desk.models import GuardAction
from markov_debate.desk.probes import LIVE, PROBE_PATHS, store_problem
from markov_debate.desk.security import host_of
from markov_debate.desk.serving import ACCEPT_BACKLOG, ServerLimits, guarded_protocol, server_limits
from markov_debate.desk.store import Store
from markov_debate.guard.check import Checker
from markov_debate.guard.core import Guard, new_request_id
from markov_debate.guard.record import Recorder
from markov_debate.guard.respond import (
    GuardJSON,
    error,
    headers,
    refusal,
    upstream_failed,
    verified_completion,
    worst,
)
from markov_debate.guard.settings import GuardKey, GuardSettings, RouteSettings
from markov_debate.guard.sources import GuardRequestError, RequestText, read_request
from markov_debate.guard.streams import stream_response
from markov_debate.guard.trail import record_decision
from markov_debate.guard.upstream import Upstream, UpstreamError, answer_texts

__all__ = ["create_app", "server_config"]

log = logging.getLogger("markov_debate.guard")


_JSON_TYPES = ("application/json",)


def _unforgeable(request: Request) -> Response | None:
    """Without keys, a refusal for what a web page could have sent: a body that is not JSON (a page posts text/plain
    or a form to any address without asking first) or an Origin that is not the guard's own. Such a request would
    spend the upstream's key and, through DNS rebinding, read the answer (`allowed_hosts` refuses that name)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in _JSON_TYPES and not kind.endswith("+json"):
        return error(
            415, "content-type: a guard without keys takes application/json only", kind="invalid_request_error"
        )
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return error(403, "origin: a request from another site is refused", kind="invalid_request_error")
    return None


def _caller(guard: Guard, request: Request) -> GuardKey | Response | None:
    """The caller's key; None without keys configured (after refusing what a web page could have forged); an error
    response for a missing or unknown key."""
    if not guard.settings.keys:
        return _unforgeable(request)
    auth = request.headers.get("authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    key = guard.settings.key_for(token) if token else None
    if key is None:
        return error(401, "a valid API key is required (Authorization: Bearer KEY)", kind="invalid_request_error")
    return key


_OFF_LOOP_BYTES = 64 * 1024
"""A request body above this is parsed off the event loop (a few MB of JSON holds the loop for tens of ms)."""


async def _body(request: Request, limit: int) -> bytes | Response:
    size = 0
    parts: list[bytes] = []
    async for part in request.stream():
        size += len(part)
        if size > limit:
            return error(413, f"the request body is larger than {limit} bytes", kind="invalid_request_error")
        parts.append(part)
    return b"".join(parts)


async def _chat(guard: Guard, request: Request, route: str | None) -> Response:
    if route is not None and route not in guard.settings.routes:
        return error(404, f"no route {route[:60]!r}", kind="invalid_request_error")
    key = _caller(guard, request)
    if isinstance(key, Response):
        return key
    raw = await _body(request, guard.settings.max_body_bytes)
    if isinstance(raw, Response):
        return raw
    try:
        # a large body is parsed in a thread: the event loop serves every other request meanwhile
        parsed = json.loads(raw) if len(raw) <= _OFF_LOOP_BYTES else await asyncio.to_thread(json.loads, raw)
        text = read_request(parsed)
    except (ValueError, RecursionError) as exc:
        param = exc.param if isinstance(exc, GuardRequestError) else "body"
        message = str(exc) if isinstance(exc, GuardRequestError) else f"body: not JSON ({exc})"
        if isinstance(exc, RecursionError):
            message = "body: nested too deeply to read"
        return error(400, message, kind="invalid_request_error", param=param)
    chosen = guard.settings.effective(route, key)
    caller = key.name if key is not None else "anonymous"
    auth = None if guard.settings.keys else request.headers.get("authorization")
    request_id = new_request_id()
    with telemetry.span("guard", "GUARDRAIL", {"debate.request_id": request_id, "debate.policy": chosen.policy}):
        if text.forwarded.get("stream") is True:
            return await stream_response(
                guard, text, chosen, auth=auth, request_id=request_id, caller=caller, route=route
            )
        return await _whole(guard, text, chosen, auth=auth, request_id=request_id, caller=caller, route=route)


async def _whole(
    guard: Guard,
    text: RequestText,
    chosen: RouteSettings,
    *,
    auth: str | None,
    request_id: str,
    caller: str,
    route: str | None,
) -> Response:
    try:
        completion = await guard.upstream.complete(text.forwarded, auth=auth, request_id=request_id)
    except UpstreamError as exc:
        log.warning("guard %s: %s", request_id, exc)
        return upstream_failed(exc)
    answers = answer_texts(completion)
    results = await guard.verify_choices(text, list(enumerate(answers)), request_id=request_id, chosen=chosen)
    found = [v for v, _ in results]

    async def record() -> None:
        for (verification_, report), answer in zip(results, answers, strict=True):
            record_decision(guard.recorder, text, answer, verification_, report, caller=caller, route=route)

    # Queued once the answer is written (Starlette runs a response's background task after its body): the caller
    # does not wait for it, and uvicorn's drain on shutdown still does.
    shown = worst(found)
    if shown.action == "refused":
        return refusal(shown, background=BackgroundTask(record))
    out = verified_completion(completion, found, guard.settings.block_message)
    return GuardJSON(out, headers=headers(shown), background=BackgroundTask(record))


def _lifespan(settings: GuardSettings, store: Store) -> Any:
    key = settings.upstream_key.get_secret_value() if settings.upstream_key is not None else None
    modes = {settings.debate, *(r.debate for r in [*settings.routes.values(), *settings.keys] if r.debate)}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        guard = Guard(
            settings=settings,
            upstream=Upstream(
                settings.upstream,
                key=key,
                timeout_s=settings.upstream_timeout_s,
                max_answer_bytes=settings.max_answer_bytes,
            ),
            checker=Checker(settings.verifier),
            recorder=Recorder(store.url),
        )
        await guard.recorder.start()
        app.state.guard = guard
        try:
            await guard.checker.start(modes)
            yield
        finally:
            # In flight requests have finished (uvicorn drains them first): what they decided is written now.
            await guard.upstream.aclose()
            await guard.checker.aclose()
            left = await guard.recorder.close()
            store.close()
            app.state.stop_summary = f"{guard.recorder.stored} decision(s) stored, {left} not"
            log.info("guard: stopped; %s", app.state.stop_summary)

    return lifespan


async def _models(request: Request) -> Response:
    guard: Guard = request.app.state.guard
    key = _caller(guard, request)
    if isinstance(key, Response):
        return key
    auth = None if guard.settings.keys else request.headers.get("authorization")
    try:
        status, body = await guard.upstream.models(auth=auth, request_id=new_request_id())
    except UpstreamError as exc:
        return upstream_failed(exc)
    return Response(body, status_code=status, media_type="application/json")


async def _metrics(request: Request) -> Response:
    """The guard's figures in the Prometheus text format (open, as the probes are: counts only; restrict it at the
    proxy, docs/guard.md)."""
    return metrics_response(request.app.state.metrics)


def _readings(app: FastAPI) -> Iterator[Reading]:
    guard: Guard | None = getattr(app.state, "guard", None)
    if guard is None:  # not started yet
        return
    recorder = guard.recorder
    # every action from the start, at 0 until it happens: a ratio of rates needs its series to exist
    actions = [({"action": action}, float(recorder.actions.get(action, 0))) for action in get_args(GuardAction)]
    yield "guard_actions_total", "Answers by what the guard did with them, since start", actions
    yield "guard_decisions_waiting", "Decisions not yet written to the store", [({}, float(recorder.pending))]
    stored: list[tuple[dict[str, str], float]] = [({}, float(recorder.stored))]
    yield "guard_decisions_stored_total", "Decisions written to the store since start", stored
    yield (
        "guard_decisions_dropped_total",
        "Decisions lost (the store away too long, a writer killed)",
        [({}, float(recorder.dropped))],
    )
    up = {"up": 1.0, "down": 0.0}.get(guard.checker.judge)
    if up is not None:
        yield "guard_judge_up", "1 while the judge answers, 0 while the breaker holds it down", [({}, up)]
    failing = 0.0 if recorder.failing_since is None else 1.0
    yield "guard_store_failing", "1 while writing decisions to the store fails", [({}, failing)]


async def _live(request: Request) -> JSONResponse:
    return JSONResponse(LIVE)


async def _ready(request: Request) -> JSONResponse:
    """Readiness (at /readyz, /healthz and /v1/health): whether the guard can do its job, which is to answer. A store
    that is away does not stop it (decisions wait in memory and are written when it is back: the guard is ready and
    says `degraded` with the store's state); it is not ready when answers would be refused: its judge down, or its
    backlog of waiting decisions full, under `--on-failure closed`. The decisions waiting, stored and dropped."""
    guard: Guard = request.app.state.guard
    store = await store_problem(request.app.state.store)
    failing = guard.recorder.failing_since is not None
    judge = guard.checker.judge
    closed = guard.settings.on_failure == "closed"
    refusing = closed and (judge == "down" or guard.recorder.full)
    ready = not refusing
    body = {
        "status": "unavailable" if not ready else "degraded" if store or failing or judge == "down" else "ok",
        "ready": ready,
        "store": store or ("failing" if failing else "ok"),
        "judge": judge,
        "decisions_waiting": guard.recorder.pending,
        "decisions_stored": guard.recorder.stored,
        "decisions_dropped": guard.recorder.dropped,
    }
    return JSONResponse(body, status_code=200 if ready else 503)


def create_app(settings: GuardSettings, *, store: Store | None = None) -> FastAPI:
    """The guard over `store` (opened from settings.db_url when not given)."""
    store = store or Store(settings.db_url)
    app = FastAPI(
        title="markov-debate guard",
        lifespan=_lifespan(settings, store),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    async def chat(request: Request) -> Response:
        return await _chat(request.app.state.guard, request, None)

    async def routed_chat(route: str, request: Request) -> Response:
        return await _chat(request.app.state.guard, request, route)

    app.add_api_route("/v1/chat/completions", chat, methods=["POST"])
    app.add_api_route("/route/{route}/v1/chat/completions", routed_chat, methods=["POST"])
    app.add_api_route("/v1/models", _models, methods=["GET"])
    app.add_api_route("/route/{route}/v1/models", _models, methods=["GET"])
    app.add_api_route("/metrics", _metrics, methods=["GET", "HEAD"])
    app.add_api_route("/livez", _live, methods=["GET", "HEAD"])
    for path in PROBE_PATHS[1:]:
        app.add_api_route(path, _ready, methods=["GET", "HEAD"])
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.state.store = store
    app.state.guard_settings = settings
    app.state.metrics = CollectorRegistry()
    app.state.metrics.register(Readings(lambda: _readings(app)))
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    """A path or method no route takes, in the OpenAI error shape every other answer of the guard has (an OpenAI
    client reads `error.message`; Starlette's own is `{"detail": "Not Found"}`), with its headers (405's Allow)."""
    assert isinstance(exc, StarletteHTTPException)
    said = {404: f"no such path {request.url.path[:80]!r}", 405: f"{request.method} is not allowed on this path"}
    response = error(exc.status_code, said.get(exc.status_code, str(exc.detail)), kind="invalid_request_error")
    response.headers.update(exc.headers or {})
    return response


_CHAT = "/v1/chat/completions"
_ROUTED = "/route/"
_PLAIN_CHAT = SimpleNamespace(path=_CHAT)
_ROUTED_CHAT = SimpleNamespace(path="/route/{route}" + _CHAT)


def _chat_route(path: str) -> tuple[bool, str | None]:
    """Whether `path` is a chat path, and the route it names (None for the plain one)."""
    if path == _CHAT:
        return True, None
    if path.startswith(_ROUTED) and path.endswith(_CHAT):
        name = path[len(_ROUTED) : -len(_CHAT)]
        if name and "/" not in name:
            return True, name
    return False, None


def serving(app: FastAPI) -> ASGIApp:
    """`app` with its chat routes served ahead of FastAPI's middleware and router: every guarded request went
    through seven layers of them for nothing they add here (the guard reads its own body, answers its own errors),
    which cost about 0.3 ms of CPU a request (measured with benchmarks/bench_guard.py). Everything else, lifespan
    included, is FastAPI's (its own chat routes, the same handler, serve `app` mounted in another ASGI stack)."""

    keyless = (
        frozenset(host_of(h) for h in app.state.guard_settings.allowed_hosts)
        if not app.state.guard_settings.keys
        else None
    )

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if keyless is not None and scope["type"] == "http":
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_of(host) not in keyless:
                refused = error(
                    400,
                    "host: this guard does not answer to that name (see --allowed-host)",
                    kind="invalid_request_error",
                )
                await refused(scope, receive, send)
                return
        if scope["type"] == "http" and scope["method"] == "POST":
            chat, route = _chat_route(scope["path"])
            if chat:
                scope["route"] = _ROUTED_CHAT if route is not None else _PLAIN_CHAT  # its metrics' label
                response = await _chat(app.state.guard, Request(scope, receive), route)
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    # Outside everything: every request is counted, the chat routes served here included.
    return HttpMetrics(serve, registry=app.state.metrics, prefix="guard")


def server_config(
    app: FastAPI,
    *,
    host: str,
    port: int,
    drain_s: float = 30.0,
    verbose: bool = False,
    limits: ServerLimits | None = None,
) -> uvicorn.Config:
    """How `debate guard` serves `app`: httptools' parser (h11's costs ~0.6 ms more CPU a request, measured with
    benchmarks/bench_guard.py) under `limits`, the same flags as the desk's (default: theirs, a 10 s header
    deadline)."""
    return uvicorn.Config(
        serving(app),
        host=host,
        port=port,
        log_level="info" if verbose else "warning",
        log_config=None,  # uvicorn's lines in the log's one format (markov_debate.desk.logs)
        http=guarded_protocol(limits or server_limits(max_connections=None, header_timeout_s=10.0), "httptools"),
        timeout_keep_alive=5,
        timeout_graceful_shutdown=int(drain_s),
        backlog=ACCEPT_BACKLOG,
    )
