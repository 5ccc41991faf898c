"""`debate serve`, `debate worker` and `debate new-key`, added to the `debate` command by entry point."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from debate.cli import add_verifier_arguments, examples, secret_from_file, verifier_config
from debate.cli.conventions import Subcommands
from debate.errors import DebateError, UsageError
from debate.extras import require_extra
from markov_debate.desk.auth import (
    ROLE_PERMISSIONS,
    Principal,
    guard_key_table,
    key_line,
    key_name,
    load_keys,
    new_key,
)
from markov_debate.desk.flags import (
    check_limits,
    connection_arguments,
    limits_from,
    log_format_argument,
    quota_arguments,
    server_limit_arguments,
)
from markov_debate.desk.logs import announce, configure_server_logging, run_server, serve_when_ready
from markov_debate.desk.settings import DeskSettings, default_db_url

__all__ = ["register"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
DESK_BODY_MB = 10.0
"""The desk's largest request body by default, in MiB (a batch upload is one body)."""
log = logging.getLogger(__name__)


def register(sub: Subcommands) -> None:
    """Add serve, worker and new-key to the `debate` subcommands."""
    _register_serve(sub)
    _register_worker(sub)


def _register_serve(sub: Subcommands) -> None:
    serve = sub.add_parser(
        "serve",
        help="the audit desk: HTTP API, audit store and web UI (http://127.0.0.1:8000)",
        description="Serve the audit desk. Without keys it binds loopback only; any other --host needs API keys "
        "(--api-keys-file or DEBATE_API_KEYS).",
        epilog=examples(
            "debate serve                                   # http://127.0.0.1:8000, embedded model, SQLite",
            "debate serve --model.base-url http://localhost:8000/v1 --port 8080",
            "debate serve --host 0.0.0.0 --allowed-host desk.example.com --api-keys-file keys.txt --jobs 0",
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients use to reach the desk (repeatable); any other Host header gets 400, which stops "
        "DNS-rebinding pages (default: loopback names, and --host when it is one address)",
    )
    serve.add_argument(
        "--api-keys-file",
        type=Path,
        default=None,
        help="keys, one NAME:ROLE:sha256:HEX (or NAME:ROLE:KEY) per line; roles: "
        f"{', '.join(ROLE_PERMISSIONS)} (see `debate new-key`)",
    )
    _store_arguments(serve)
    serve.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="audits the in-process worker runs at once; 0: none, use `debate worker` (default: 2)",
    )
    serve.add_argument(
        "--max-bodies-mb",
        type=float,
        default=128.0,
        help="MiB of request bodies read into memory at once, over all requests; past it 503 (default: 128)",
    )
    serve.add_argument(
        "--max-claim-chars",
        type=int,
        default=2_000,
        help="longest claim a request may give; longer is a 422 (default: 2000)",
    )
    server_limit_arguments(serve, body_mb=DESK_BODY_MB)
    connection_arguments(serve)
    quota_arguments(serve)
    log_format_argument(serve)
    add_verifier_arguments(serve, batch=False)
    serve.set_defaults(handler=_serve)


def _register_worker(sub: Subcommands) -> None:
    worker = sub.add_parser(
        "worker",
        help="run audit jobs from a shared store (more processes or machines)",
        epilog=examples(
            "debate worker --db postgresql+psycopg://desk@db/desk --model.base-url http://gpu:8000/v1 --jobs 8"
        ),
    )
    _store_arguments(worker)
    log_format_argument(worker)
    worker.add_argument("--jobs", type=int, default=2, help="audits run at once (default: 2)")
    worker.add_argument(
        "--requeue-failed",
        action="store_true",
        help="first bring every failed audit back to the queue (after an outage), then work",
    )
    add_verifier_arguments(worker, batch=False)
    worker.set_defaults(handler=_worker)
    key = sub.add_parser(
        "new-key",
        help="make an API key for the audit desk or the guard: the line (or table) its file needs on standard "
        "output, its SHA-256 only; the key itself once, on standard error",
        epilog=examples("debate new-key alice reviewer >> keys.txt", "debate new-key app --for guard >> guard.toml"),
    )
    key.add_argument(
        "name",
        type=_key_name,
        help="who holds it (recorded with every request made with it): 1 to 64 of A-Z, a-z, 0-9, _ . @ -",
    )
    key.add_argument("role", nargs="?", choices=list(ROLE_PERMISSIONS), help="what it may do on the desk")
    key.add_argument(
        "--for",
        dest="target",
        choices=("desk", "guard"),
        default="desk",
        help="desk: a NAME:ROLE:sha256:HEX line for --api-keys-file; guard: a [keys.NAME] table for --guard-config "
        "(no role: a guard key may set its own policy in the table) (default: desk)",
    )
    key.set_defaults(handler=_new_key)


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="audit store: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (default: DEBATE_DESK_DB,"
        " else desk.sqlite in the user data directory)",
    )
    parser.add_argument(
        "--db-url-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="read the store URL from FILE (its first line), so a password in it stays out of `ps` (default: none)",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a running audit whose worker is silent this long is run again (default: 60)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep model calls in DIR/calls.sqlite so an interrupted audit is resumed without "
        "repeating them (default: beside a SQLite store; off for other stores)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not cache model calls")


def _settings(args: argparse.Namespace, *, keys: bool) -> DeskSettings:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    config = verifier_config(args)
    if config.debate.calibration is not None:
        # a calibration of another chain or prompt set is refused here, not by every audit the workers take
        from debate.pipeline import Verifier

        Verifier(config=config)
    db_url = _db_url(args)
    try:
        url = make_url(db_url)
    except (ArgumentError, ValueError) as exc:  # what sqlalchemy raises for a malformed URL
        raise UsageError(f"--db: not a database URL: {db_url!r} ({exc})") from exc
    cache_dir = args.cache
    if cache_dir is None and url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        cache_dir = Path(url.database).parent
    if cache_dir is not None and not args.no_cache:
        cache_dir.mkdir(parents=True, exist_ok=True)
        config = config.model_copy(update={"call_cache": str(cache_dir / "calls.sqlite")})
    api_keys = load_keys(getattr(args, "api_keys_file", None)) if keys else []
    return DeskSettings(
        db_url=db_url,
        verifier=config,
        keys=api_keys,
        jobs=args.jobs,
        lease_s=args.lease,
        max_body_bytes=int((getattr(args, "max_body_mb", None) or DESK_BODY_MB) * 1024 * 1024),
        max_bodies_in_flight_bytes=int(getattr(args, "max_bodies_mb", 128.0) * 1024 * 1024),
        max_claim_chars=getattr(args, "max_claim_chars", 2_000),
        **{
            field: getattr(args, field)
            for field in ("max_uploads", "max_uploads_per_key", "key_submits_per_minute", "key_max_pending")
            if hasattr(args, field)
        },
        price_prompt_per_mtok=getattr(args, "price_prompt", 0.0),
        price_completion_per_mtok=getattr(args, "price_completion", 0.0),
        session_secret=_session_secret(args),
    )


def _session_secret(args: argparse.Namespace) -> str | None:
    path = getattr(args, "session_secret_file", None)
    if path is not None:
        return secret_from_file(path, "--session-secret-file")
    return os.environ.get("DEBATE_SESSION_SECRET") or None


def _db_url(args: argparse.Namespace) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if args.db_url_file is not None:
        if args.db:
            raise UsageError("give --db or --db-url-file, not both")
        return secret_from_file(args.db_url_file, "--db-url-file")
    if args.db:
        try:
            password = make_url(args.db).password
        except (ArgumentError, ValueError):
            password = None  # malformed: _settings reports it with its reason
        if password:
            log.warning(
                "--db: a password on the command line is visible to other users (ps); use --db-url-file "
                "or DEBATE_DESK_DB"
            )
        return str(args.db)
    return default_db_url()


def _serve(args: argparse.Namespace) -> int:
    configure_server_logging(args.log_format, verbose=args.verbose)  # first: imports log too (alembic's)
    require_extra("desk", "debate serve")
    import uvicorn
    from sqlalchemy.engine import make_url

    from markov_debate.desk.app import create_app
    from markov_debate.desk.serving import (
        ACCEPT_BACKLOG,
        guarded_protocol,
        limit_accept_errors,
        limit_invalid_request_logs,
    )

    check_limits(args)
    settings = _exposed(args, _settings(args, keys=True))
    app = create_app(settings)
    where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/"
    ready = (
        f"audit desk on {where} (store {make_url(settings.db_url).render_as_string(hide_password=True)}; "
        f"auth {'keys' if settings.keys else 'off, loopback only'})"
    )
    limits = limits_from(args, reserved_files=2 * settings.max_uploads)  # an upload: a spooled file and our copy
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="info" if args.verbose else "warning",
        log_config=None,  # uvicorn's lines in the desk's one format (markov_debate.desk.logs)
        http=guarded_protocol(limits),
        timeout_keep_alive=5,
        proxy_headers=bool(args.trusted_proxy),
        forwarded_allow_ips=",".join(args.trusted_proxy) or None,
        backlog=ACCEPT_BACKLOG,
    )
    server = uvicorn.Server(config)

    async def run() -> bool:
        limit_accept_errors(asyncio.get_running_loop())
        limit_invalid_request_logs()
        return await serve_when_ready(server, f"{ready}; limits: {limits.describe()}")

    if not run_server(run()):
        raise DebateError("the desk did not start (the line above says why)")
    return 0


def _exposed(args: argparse.Namespace, settings: DeskSettings) -> DeskSettings:
    """`settings` with the host names the desk answers to; a UsageError when --host exposes it without keys or
    answers on every address without naming its names."""
    if args.host not in _LOOPBACK and not settings.keys:
        raise UsageError(
            f"--host {args.host} exposes the desk beyond this machine: give API keys (--api-keys-file or "
            "DEBATE_API_KEYS; `debate new-key NAME ROLE` makes one)"
        )
    wildcard = args.host in ("0.0.0.0", "::", "")
    if wildcard and not args.allowed_host:
        raise UsageError(
            f"--host {args.host or '(all)'} answers on every address: name the ones clients use with --allowed-host "
            "(e.g. --allowed-host desk.example.com --allowed-host 10.0.0.5)"
        )
    extra = () if wildcard or args.host in _LOOPBACK else (args.host,)
    return settings.model_copy(update={"allowed_hosts": (*settings.allowed_hosts, *extra, *args.allowed_host)})


def _worker(args: argparse.Namespace) -> int:
    configure_server_logging(args.log_format, verbose=args.verbose)  # first: imports log too (alembic's)
    require_extra("desk", "debate worker")
    from sqlalchemy.engine import make_url

    from markov_debate.desk.store import Store
    from markov_debate.desk.worker import Worker

    settings = _settings(args, keys=False)
    if settings.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    store = Store(settings.db_url)
    if args.requeue_failed:
        requeued = store.retry_failed(Principal(name=f"worker@{socket.gethostname()}", role="admin"))
        announce(f"requeued {requeued} failed audit(s)")

    stopped_by: list[signal.Signals] = []

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        worker = Worker(store, settings)

        def stopping(signum: signal.Signals) -> None:
            if not stop.is_set():
                stopped_by.append(signum)
                announce(f"worker {worker.name}: {signum.name}: stopping; audits in progress go back to the queue")
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping, signal.Signals(signum))
        announce(f"worker {worker.name} on {make_url(settings.db_url).render_as_string(hide_password=True)}")
        await worker.run(stop)
        announce(f"worker {worker.name}: stopped")

    try:
        asyncio.run(run())
    finally:
        store.close()
    # Drained, then the exit code of every `debate` command stopped so: 143 for SIGTERM, 130 for Ctrl-C.
    return 0 if not stopped_by else 143 if stopped_by[0] == signal.SIGTERM else 130


def _key_name(value: str) -> str:
    try:
        return key_name(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _new_key(args: argparse.Namespace) -> int:
    # Standard output is the keys-file line alone (`>> keys.txt` appends exactly it); the key, which nothing
    # stores, goes to standard error: the terminal, once.
    if (args.target == "desk") == (args.role is None):
        raise UsageError("a desk key needs a ROLE" if args.role is None else "a guard key has no ROLE (--for guard)")
    key = new_key()
    line = key_line(args.name, args.role, key) if args.role is not None else guard_key_table(args.name, key)
    print(f"key for {args.name} (give it to them; it is not stored anywhere): {key}", file=sys.stderr)
    print(line)
    return 0
