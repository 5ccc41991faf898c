"""The flags of `debate serve` that say what its clients may take: connections and their deadlines, which proxies
name the client, prices, uploads and per-key quotas; and their checks."""

from __future__ import annotations

import argparse

from debate.errors import UsageError
from markov_debate.desk.logs import LOG_FORMATS

__all__ = ["check_limits", "connection_arguments", "log_format_argument", "quota_arguments"]


def connection_arguments(serve: argparse.ArgumentParser) -> None:
    """What the server allows its clients: connections, the header deadline, which proxies name the client."""
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="open client connections at most; at the cap the longest-idle one is closed for a new one (default: the "
        "open-file limit, raised to its hard limit, less 352 kept for the store, the model endpoint and accepts)",
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
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a client has to send a request's line and headers before its connection is closed (default: 10)",
    )
    serve.add_argument(
        "--body-min-rate",
        type=float,
        default=1024.0,
        metavar="BYTES",
        help="bytes a second a request body must average over each 10 s while it is read, or its connection is "
        "closed (default: 1024)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds the server spends reading one request body at most (default: 300)",
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
    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError("--max-connections must be at least 1")
    for flag, value in (
        ("--header-timeout", args.header_timeout),
        ("--body-timeout", args.body_timeout),
        ("--body-min-rate", args.body_min_rate),
    ):
        if value <= 0:
            raise UsageError(f"{flag} must be more than 0")
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
