"""The `debate` command line, one module per concern: `conventions` (the parser, help, errors, exit codes and
`add_command` for plugins), `fields` (one flag per configuration field, named as the field is), `layers` (defaults,
`--config FILE`, environment and flags, each value with its source), `options` (the engine's shared options ->
VerifierConfig), `settings` (`debate config show`), `render` (a Report on a console), `verify` (one response or a
batch) and `admin` (cache, chains, check-tools). Plugin commands come from the `markov_debate.commands` entry
points."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from debate.cli import admin, settings, verify
from debate.cli.conventions import (
    COMMAND_ENTRY_POINT_GROUP,
    EXIT_CODES,
    Handler,
    Parser,
    Register,
    add_command,
    add_command_group,
    err,
    examples,
    log_handler,
    output_folder,
    package_version,
    progress_bar,
    walk,
)
from debate.cli.inputs import secret_from_file
from debate.cli.interrupts import on_interrupt, say_interrupted
from debate.cli.options import add_verifier_arguments, items_in_flight, verifier_config
from debate.concurrency import Terminated, cancel_on_sigterm
from debate.errors import DebateError, InputError, UsageError
from debate.extras import require_extra
from debate.registry import installed_entry_points

__all__ = [
    "COMMAND_ENTRY_POINT_GROUP",
    "Handler",
    "UsageError",
    "add_command",
    "add_command_group",
    "add_verifier_arguments",
    "build_parser",
    "examples",
    "items_in_flight",
    "main",
    "on_interrupt",
    "output_folder",
    "progress_bar",
    "secret_from_file",
    "verifier_config",
    "walk",
]

_BUILTIN_COMMANDS = frozenset({"verify", "check-tools", "chains", "cache", "config"})


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; plugin commands (debate eval, ...) are loaded unless `argv` names a built-in command, whose
    start-up should not pay for importing them."""
    parser = Parser(
        prog="debate",
        description="Detect hallucinations by Markov-chain multi-agent debate.",
        epilog=examples(
            'debate verify --question "Who wrote Hamlet?" --answer "Marlowe" --evidence @knowledge.txt',
            "debate verify --input answers.jsonl --output verdicts.jsonl --fail-on non-factual",
            "debate eval halueval --task qa          # the paper's QA protocol, 150 items",
            "debate COMMAND --help                   # every option of a command, with its default",
            extra=EXIT_CODES,
        ),
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s (markov-debate) {package_version()}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log retries, endpoint negotiation, server start-up (anywhere on the line)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    verify.register(sub)
    admin.register(sub)
    settings.register(sub)
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    if not (words and words[0] in _BUILTIN_COMMANDS):
        for entry in installed_entry_points(COMMAND_ENTRY_POINT_GROUP):
            register: Register = entry.load()
            register(sub)
    for child in walk(parser)[1:]:
        # Global options work after the subcommand too: SUPPRESS keeps a subcommand from resetting what was
        # given before it.
        child.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log retries, endpoint negotiation and server start-up",
        )
        if "-V" not in child._option_string_actions:
            # `debate verify --version` answers the version, as `debate --version` does (not "did you mean").
            child.add_argument(
                "-V", "--version", action="version", version=f"debate (markov-debate) {package_version()}"
            )
    return parser


def _on_sigterm(signum: int, frame: object) -> None:
    # Outside the event loop (imports, argparse, writing the output): stop where we are, as Ctrl-C would.
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `debate` command; Ctrl-C (exit 130) or SIGTERM (143) at any moment is one line."""
    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)
            cancel_on_sigterm()
        return _main(argv)
    except KeyboardInterrupt as exc:
        logging.disable(logging.CRITICAL)  # nothing the shutdown logs after this is news to the user
        terminated = isinstance(exc, Terminated)
        say_interrupted("terminated" if terminated else "interrupted")
        return 143 if terminated else 130


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser(argv).parse_args(argv)
    level = logging.INFO if args.verbose else logging.WARNING
    console_log = log_handler(err)
    # On the handler too: a library that sets its own logger to DEBUG (bm25s does) would otherwise reach the
    # terminal past the root logger's level, which only filters records logged at the root.
    console_log.setLevel(level)
    logging.basicConfig(level=level, handlers=[console_log], force=True)
    handler: Handler = args.handler
    try:
        extra = getattr(args, "needs_extra", None)
        if extra is not None:
            require_extra(extra, f"debate {args.command}")
        return handler(args)
    except (UsageError, InputError) as exc:
        print(f"debate: error: {exc.for_cli()}", file=sys.stderr)
        return 2
    except DebateError as exc:
        print(f"debate: error: {exc.for_cli()}", file=sys.stderr)
        return 1
