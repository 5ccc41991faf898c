"""`debate guard`, added to the `debate` command by entry point."""

from __future__ import annotations

import argparse
import logging
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from debate.cli import add_verifier_arguments, examples, secret_from_file, verifier_config
from debate.cli.conventions import Subcommands, mark_brief
from debate.cli.interrupts import on_interrupt
from debate.errors import DebateError, UsageError, validation_problem
from debate.extras import require_extra
from debate.files import read_text_file
from markov_debate.desk.flags import limits_from, log_format_argument, server_limit_arguments
from markov_debate.desk.logs import configure_server_logging, run_server, serve_when_ready
from markov_debate.guard.settings import GUARD_BODY_MB, GuardSettings

__all__ = ["register"]

log = logging.getLogger("markov_debate.guard")
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_CHOICES: dict[str, tuple[str, ...]] = {
    "policy": ("annotate", "flag", "block"),
    "debate": ("inline", "later"),
    "on_failure": ("open", "closed"),
    "stream": ("hold", "pass"),
    "act_at": ("moderate", "high"),
}
_HELP = {
    "policy": "annotate: pass with the verification; flag: pass, and a risky answer waits for review on the desk; "
    "block: replace a risky answer by the block message (default: annotate)",
    "debate": "inline: debate what the cheap checks leave open before answering; later: answer on the cheap "
    "checks, debate afterwards on the desk (default: inline)",
    "on_failure": "when the verification cannot run or runs out of time: open passes the answer marked "
    "unverified, closed refuses it (default: open)",
    "stream": "stream: true answered as hold (verify, then stream) or pass (stream as it comes, the verification "
    "last; nothing can be blocked) (default: hold)",
    "act_at": "the risk at which flag flags and block blocks (default: high)",
}


def register(sub: Subcommands) -> None:
    """Add `guard` to the `debate` subcommands."""
    guard = sub.add_parser(
        "guard",
        help="an OpenAI-compatible server in front of an endpoint: verifies each answer before it is returned",
        description="Serve /v1/chat/completions and /v1/models in front of --upstream; each answer is verified "
        "against the sources its request carried (a `sources` field, or `[id] passage` lines in system and tool "
        "messages) and annotated, flagged or blocked. Every decision is an audit in the desk's store.",
        epilog=examples(
            "debate guard --upstream http://127.0.0.1:8080/v1                 # annotate, on the embedded judge",
            "debate guard --upstream http://llm:8000/v1 --policy block --on-failure closed "
            "--model.base-url http://judge:8000/v1",
            "debate guard --upstream https://api.example.com/v1 --upstream-key-file key.txt --stream pass",
        ),
    )
    _arguments(guard)
    server_limit_arguments(guard, body_mb=GUARD_BODY_MB)
    log_format_argument(guard)
    _policy_arguments(guard)
    add_verifier_arguments(guard, batch=False)
    # the guard's own flags first in the brief --help: without them it cannot be started as its examples show
    mark_brief(
        guard,
        {
            "--upstream": "the OpenAI-compatible endpoint answers come from (its /v1 base)",
            "--port": "port (default: 8100)",
            "--policy": "what a risky answer gets: annotate (passed, with its verification), flag (passed, queued for "
            "review) or block (replaced) (default: annotate)",
            "--on-failure": "when the verification cannot run: open passes the answer marked unverified, closed "
            "refuses it (default: open)",
            "--stream": "stream: true as hold (verify, then stream) or pass (as it comes; nothing blocked)",
            "--db": None,
        },
    )
    guard.set_defaults(handler=_guard)


def _arguments(guard: argparse.ArgumentParser) -> None:
    guard.add_argument(
        "--upstream",
        default=os.environ.get("DEBATE_GUARD_UPSTREAM"),
        metavar="URL",
        help="the OpenAI-compatible endpoint answers come from, its /v1 base (default: DEBATE_GUARD_UPSTREAM)",
    )
    guard.add_argument(
        "--upstream-key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the upstream's API key, first line of FILE (default: DEBATE_GUARD_UPSTREAM_KEY; "
        "without either, the caller's Authorization is passed on)",
    )
    guard.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    guard.add_argument("--port", type=int, default=8100, help="port (default: 8100)")
    guard.add_argument(
        "--upstream-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds the upstream may take, and between two streamed chunks (default: 120)",
    )
    guard.add_argument(
        "--check-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds the verification in the request path may take; past it --on-failure decides (default: 60)",
    )
    guard.add_argument(
        "--guard-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML file of the guard's settings: the flags' (as policy, on_failure, ...), "
        "[routes.NAME] tables and [keys.NAME] tables with sha256 (flags win)",
    )
    guard.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="the desk's store, where every decision is kept (default: DEBATE_DESK_DB, else the "
        "desk's SQLite in the user data directory)",
    )
    guard.add_argument(
        "--db-url-file", type=Path, default=None, metavar="FILE", help="read the store URL from FILE (default: none)"
    )
    guard.add_argument(
        "--drain",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM or Ctrl-C, seconds in-flight requests get to finish (default: 30)",
    )


def _policy_arguments(guard: argparse.ArgumentParser) -> None:
    guard.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="without keys, another name the guard answers to besides 127.0.0.1, localhost and ::1 (a proxy's "
        "public name; repeatable)",
    )
    for name, choices in _CHOICES.items():
        guard.add_argument(
            f"--{name.replace('_', '-')}", choices=choices, default=None, metavar="|".join(choices), help=_HELP[name]
        )
    guard.add_argument(
        "--block-below",
        type=float,
        default=None,
        metavar="P",
        help="with --debate.calibration: a P(factual) below P is high risk (default: none)",
    )
    guard.add_argument(
        "--block-message",
        default=None,
        metavar="TEXT",
        help="what replaces a blocked answer; {reasons} is replaced by why (default: a message "
        "that says the answer was withheld and why)",
    )


def _file_settings(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = tomllib.loads(read_text_file(path, "--guard-config"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--guard-config {path}: not TOML ({exc})") from None
    keys = data.get("keys")
    if isinstance(keys, dict):
        # [keys.NAME] tables: the table's name is the key's name.
        data["keys"] = [{"name": name, **value} if isinstance(value, dict) else value for name, value in keys.items()]
    return data


def settings_from(args: argparse.Namespace) -> GuardSettings:
    """The guard's settings: its file, then the flags, then the engine's configuration and the store."""
    from markov_debate.desk.settings import default_db_url

    data = _file_settings(args.guard_config)
    flags = {
        "upstream": args.upstream,
        **{name: getattr(args, name) for name in _CHOICES},
        "block_below": args.block_below,
        "block_message": args.block_message,
        "upstream_timeout_s": args.upstream_timeout,
        "check_timeout_s": args.check_timeout,
        "max_body_bytes": int(args.max_body_mb * 1024 * 1024) if args.max_body_mb is not None else None,
    }
    data.update({k: v for k, v in flags.items() if v is not None})
    if args.allowed_host:
        data["allowed_hosts"] = (
            *data.get("allowed_hosts", GuardSettings.model_fields["allowed_hosts"].default),
            *args.allowed_host,
        )
    if not data.get("upstream"):
        raise UsageError("--upstream: give the endpoint answers come from (or DEBATE_GUARD_UPSTREAM)")
    if args.upstream_key_file is not None:
        data["upstream_key"] = secret_from_file(args.upstream_key_file, "--upstream-key-file")
    elif os.environ.get("DEBATE_GUARD_UPSTREAM_KEY"):
        data["upstream_key"] = os.environ["DEBATE_GUARD_UPSTREAM_KEY"]
    if args.db_url_file is not None:
        data["db_url"] = secret_from_file(args.db_url_file, "--db-url-file")
    else:
        data["db_url"] = args.db or data.get("db_url") or default_db_url()
    data["verifier"] = verifier_config(args)
    try:
        settings = GuardSettings.model_validate(data)
    except ValidationError as exc:
        where = "--guard-config / flags" if args.guard_config else "flags"
        raise UsageError(f"{where}: {validation_problem(exc)}") from None
    if args.host not in _LOOPBACK and not settings.keys:
        raise UsageError(
            f"--host {args.host} exposes the guard beyond this machine: give callers' keys ([keys.NAME] tables "
            "with sha256 in --guard-config; `debate new-key NAME reviewer` prints a key and its hash)"
        )
    return settings


def _guard(args: argparse.Namespace) -> int:
    configure_server_logging(args.log_format, verbose=getattr(args, "verbose", False))  # first: imports log too
    require_extra("desk", "debate guard")
    import uvicorn
    from sqlalchemy.engine import make_url

    from markov_debate.guard.app import create_app, server_config

    limits = limits_from(args)  # first: a bad limit is named by its flag
    settings = settings_from(args)
    app = create_app(settings)
    # SIGTERM or Ctrl-C: uvicorn drains the requests in flight, the lifespan writes the waiting decisions, then the
    # one line the command prints says what was kept.
    on_interrupt(lambda: getattr(app.state, "stop_summary", "stopped before it started"))
    where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/v1"
    ready = (
        f"guard on {where} in front of {settings.upstream} (policy {settings.policy}, debate {settings.debate}, "
        f"on failure {settings.on_failure}, stream {settings.stream}; decisions in "
        f"{make_url(settings.db_url).render_as_string(hide_password=True)})"
    )
    config = server_config(
        app, host=args.host, port=args.port, drain_s=args.drain, verbose=getattr(args, "verbose", False), limits=limits
    )
    body = f"{settings.max_body_bytes / 1024 / 1024:g} MiB bodies"
    if not run_server(serve_when_ready(uvicorn.Server(config), f"{ready}; limits: {limits.describe()}, {body}")):
        raise DebateError("the guard did not start (the line above says why)")
    return 0
