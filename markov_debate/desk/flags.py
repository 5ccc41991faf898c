"""The flags that say what a server's clients may take: connections, their deadlines and body sizes (the same on
`debate serve` and `debate guard`), and the desk's own: which proxies name the client, prices, uploads and per-key
quotas; and their checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from debate.errors import UsageError
from markov_debate.desk.logs import LOG_FORMATS

if TYPE_CHECKING:  # the server's modules need the desk extra; the flags are read without it (--help)
    from markov_debate.desk.serving import ServerLimits

__all__ = [
    "check_limits",
    "connection_arguments",
    "limits_from",
    "log_format_argument",
    "quota_arguments",
    "server_limit_arguments",
]


def server_limit_arguments(parser: argparse.ArgumentParser, *, body_mb: float) -> None:
    """What a server we start (`debate serve`, `debate guard`) allows its clients, the same flags on both:
    connections, the header deadline, how a body must arrive, and its size. (A request's line and headers are 64
    KiB at most on both, `ServerLimits.header_bytes`.)"""
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="open client connections at most; at the cap the longest-idle one is closed for a new one (default: the "
        "open-file limit, raised to its hard limit, less 352 kept for the store, the model endpoint and accepts)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a client has to send a request's line and headers before its connection is closed (default: 10)",
    )
    parser.add_argument(
        "--body-min-rate",
        type=float,
        default=1024.0,
        metavar="BYTES",
        help="bytes a second a request body must average over each 10 s while it is read, or its connection is "
        "closed (default: 1024)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds the server spends reading one request body at most (default: 300)",
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=None,
        metavar="MB",
        help=f"largest request body in MiB; past it 413 (default: {body_mb:g})",
    )


def limits_from(args: argparse.Namespace, *, reserved_files: int = 0) -> ServerLimits:
    """The limits the flags of `server_limit_arguments` ask for (checked: a UsageError naming the flag)."""
    from markov_debate.desk.serving import server_limits

    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError("--max-connections must be at least 1")
    for flag, value in (
        ("--header-timeout", args.header_timeout),
        ("--body-timeout", args.body_timeout),
        ("--body-min-rate", args.body_min_rate),
        ("--max-body-mb", args.max_body_mb if args.max_body_mb is not None else 1.0),
    ):
        if value <= 0:
            raise UsageError(f"{flag} must be more than 0")
    return server_limits(
        max_connections=args.max_connections,
        header_timeout_s=args.header_timeout,
        body_min_rate=args.body_min_rate,
        body_timeout_s=args.body_timeout,
        reserved_files=reserved_files,
    )


def connection_arguments(serve: argparse.ArgumentParser) -> None:
    """What only the desk's server takes besides: which proxies name the client, the sessions' secret, prices."""
    serve.add_argument(
        "--session-secret-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret UI sessions are signed with, first line of FILE, so a restart signs no one out and several "
        "servers share sessions (default: DEBATE_SESSION_SECRET, else a new one each start)",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="IP",
        help="a reverse proxy whose X-Forwarded-For names the client (repeatable); from anyone else the header is "
        "ignored, so it cannot buy a fresh sign-in throttle (default: none)",
    )
    serve.add_argument(
        "--price-prompt",
        type=float,
        default=0.0,
        metavar="USD",
        help="price per million prompt tokens, for cost figures (default: 0, not tracked)",
    )
    serve.add_argument(
        "--price-completion",
        type=float,
        default=0.0,
        metavar="USD",
        help="price per million completion tokens (default: 0)",
    )


def quota_arguments(serve: argparse.ArgumentParser) -> None:
    """What one key may take: uploads read at once, submissions a minute, audits waiting."""
    serve.add_argument(
        "--max-uploads", type=int, default=16, metavar="N", help="batch uploads read at once in all (default: 16)"
    )
    serve.add_argument(
        "--max-uploads-per-key",
        type=int,
        default=2,
        metavar="N",
        help="batch uploads read at once per key (default: 2)",
    )
    serve.add_argument(
        "--key-submits-per-minute",
        type=int,
        default=600,
        metavar="N",
        help="submissions (audits, batches) one key may make a minute; more get 429 with Retry-After (default: 600)",
    )
    serve.add_argument(
        "--key-max-pending",
        type=int,
        default=20_000,
        metavar="N",
        help="audits one key may have waiting or running; a submission past it gets 429 (default: 20000)",
    )


def check_limits(args: argparse.Namespace) -> None:
    """Every number `debate serve` takes, checked before anything is opened (a UsageError naming the flag)."""
    if args.jobs < 0:
        raise UsageError("--jobs must be 0 or more")
    for flag, count in (
        ("--max-uploads", args.max_uploads),
        ("--max-uploads-per-key", args.max_uploads_per_key),
        ("--key-submits-per-minute", args.key_submits_per_minute),
        ("--key-max-pending", args.key_max_pending),
    ):
        if count < 1:
            raise UsageError(f"{flag} must be at least 1")


def log_format_argument(parser: argparse.ArgumentParser) -> None:
    """`--log-format`, the same on serve, worker and guard (markov_debate.desk.logs)."""
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: one line a record, `TIME LEVEL LOGGER: MESSAGE` (UTC, ISO 8601); json: one JSON object a line "
        "(time, level, logger, message) for a log collector (default: text)",
    )
