"""The conventions every `debate` command follows: one-line errors with "did you mean", defaults in the help, examples
(debate.cli.examples), exit codes, the console; a plugin adds commands with `add_command` (`add_command_group`)."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import math
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from debate.cli.examples import examples
from debate.errors import UsageError
from debate.extras import Extra

__all__ = [
    "COMMAND_ENTRY_POINT_GROUP",
    "EXIT_CODES",
    "Handler",
    "Parser",
    "Register",
    "Subcommands",
    "add_command",
    "add_command_group",
    "err",
    "examples",
    "log_handler",
    "mark_brief",
    "out",
    "output_folder",
    "package_version",
    "progress_bar",
    "shown",
    "walk",
]

EXIT_CODES = """exit status:
  0  done (every verdict reached, whatever it is)
  1  runtime failure: the endpoint is unreachable, refuses every request (401/403/404), or failed N items in a
     row; finished batch records are kept, re-run the same command to resume
  2  usage, configuration or input error (one line on stderr)
  3  --fail-on matched a verdict (non-factual / unverifiable)
  4  --max-cost reached: the batch stopped before the items that would pass it; finished records are kept, re-run
     with a higher --max-cost to resume
  5  a batch left input lines without a verdict (input errors, failed or unfinished items; said first on the
     summary line), or verified none; --tolerate-unchecked accepts the first, never the second
  130 interrupted (Ctrl-C); finished batch records are kept
  143 terminated (SIGTERM); finished batch records are kept"""

COMMAND_ENTRY_POINT_GROUP = "markov_debate.commands"
"""Entry points adding subcommands (a function taking the subparsers); each sets `handler` on its parser."""

Handler = Callable[[argparse.Namespace], int]
"""What a command runs: its parsed arguments in, its exit status out."""

Subcommands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""The subcommands a `markov_debate.commands` entry point's `register(sub)` adds to (with `add_command`)."""

Register = Callable[[Subcommands], None]
"""A command plugin: the `register` function its `markov_debate.commands` entry point names."""

err = Console(stderr=True)
"""stderr: progress, log records, the model line."""
out = Console()
"""stdout: the command's output."""


def progress_bar(description: ProgressColumn, *extra: ProgressColumn) -> Progress:
    """The batch progress bar on stderr: redrawn twice a second at most (a redraw costs CPU the batch needs), and
    not drawn at all when stderr is not a terminal (CI logs, pipes)."""
    return Progress(
        description,
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *extra,
        console=err,
        refresh_per_second=2,
        disable=not err.is_terminal,
    )


def output_folder(path: Path, flag: str) -> Path:
    """`path` as a folder a command will write into, refused in one line when it cannot be one (it, or a folder on
    the way to it, is an existing file)."""
    for place in [path, *path.parents]:
        if place.exists():
            if not place.is_dir():
                what = "is a file" if place == path else f"cannot be made: {place} is a file"
                raise UsageError(f"{flag} {path} {what}; give a folder")
            break
    return path


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default (argparse's ArgumentDefaultsHelpFormatter, but "off" for flags,
    and not repeated where the help already says it); epilogs keep their line breaks for the examples."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            not action.option_strings
            or "default" in text
            or action.default is argparse.SUPPRESS
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            return text
        return f"{text} (default: {shown(action.default, flag=action.nargs == 0).replace('%', '%%')})"


def shown(default: Any, *, flag: bool = False) -> str:
    """A default as help text shows it: "off" for an unset flag, "none" for no value, lists space-separated."""
    if default is None or default is False:
        return "off" if flag else "none"
    if isinstance(default, list | tuple):
        return " ".join(str(v) for v in default) or "none"
    return str(default)


_MAX_INT = 2**63 - 1
"""The largest integer any option takes (a 64-bit field's): seeds, counts and sizes alike."""

_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")


def did_you_mean(message: str, options: Sequence[str]) -> str:
    """argparse's error, with the closest valid choice or option named."""
    found = _CHOICE.search(message)
    if found is not None:
        choices = re.findall(r"'([^']*)'", found["choices"]) or [c.strip() for c in found["choices"].split(",")]
        close = difflib.get_close_matches(found["value"], choices, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{message[: found.start()]}invalid choice: {found['value']!r}{hint} (choose from {', '.join(choices)})"
    if message.startswith("unrecognized arguments:"):
        guesses = []
        for word in message.split(":", 1)[1].split():
            if word.startswith("--"):
                typed = word.split("=")[0]
                # Compared without the dashes every option shares, which would make any two look alike.
                others = {o[2:]: o for o in options if o != typed}
                # an abbreviation names the options it starts (options are never abbreviated: Parser), before any
                # option merely alike: `--b` is the start of --base-rate, not a misspelt --db
                starting = sorted(o for o in options if o.startswith(typed) and o != typed)
                close = starting or [
                    others[c] for c in difflib.get_close_matches(typed[2:], list(others), n=1, cutoff=0.6)
                ]
                if close:
                    shown = close[:4]
                    either = ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0]
                    guesses.append(f"{either} for {word}")
        if guesses:
            return f"{message}; did you mean {', '.join(guesses)}?"
    return message


class Parser(argparse.ArgumentParser):
    """One-line errors (with "did you mean"), defaults shown in every option's help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        # no abbreviations: `--debate.cal` must not stand for `--debate.calibration`, or a later option with the
        # same start would change what an old command means (the error names the full option instead)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    _argv: Sequence[str] = ()

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # Every command's numbers, checked once here: no option means anything by inf, nan or a 30-digit integer,
        # and each would otherwise reach a sleep, a sum or a 64-bit field as a traceback.
        value = super()._get_value(action, arg_string)
        if action.type is float and not math.isfinite(value):
            raise argparse.ArgumentError(action, f"must be a finite number, got {arg_string!r}")
        if action.type is int and abs(value) > _MAX_INT:
            raise argparse.ArgumentError(
                action, f"{arg_string[:30]}{'...' if len(arg_string) > 30 else ''} is too large"
            )
        return value

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self.spelled(self._argv), namespace)

    def spelled(self, args: Sequence[str]) -> list[str]:
        """`args` with each of this parser's flags in the spelling it was declared with: `--debate.min_rounds` and
        `--debate.min-rounds`, `--max_cost` and `--max-cost` are one flag each (users type hyphens, the config's keys
        have underscores; the help shows hyphens). Only a flag this parser does not know is respelled, and only into
        one it knows; anything after `--` is left as it is. Each subcommand's parser respells its own arguments."""
        known = self._option_string_actions
        out: list[str] = []
        for index, arg in enumerate(args):
            if arg == "--":
                return [*out, *args[index:]]
            flag, eq, value = arg.partition("=")
            if flag.startswith("--") and flag not in known:
                body = flag[2:]
                options = {f"--{body.replace('-', '_')}", f"--{body.replace('_', '-')}"} & set(known)
                if len(options) == 1:
                    arg = options.pop() + eq + value
            out.append(arg)
        return out

    show_all = False
    """Set by --help-all: print every option, not the brief list."""

    def format_help(self) -> str:
        brief = [a for a in self._actions if getattr(a, "brief", None) is not None]
        if not brief or self.show_all:
            return super().format_help()
        return _brief_help(self, brief)

    def error(self, message: str) -> NoReturn:
        # Suggest only options of the command the user ran (argparse reports unknown options from the top parser),
        # and never an old spelling.
        scope = self._command(self._argv)
        options = [
            o
            for o, action in scope._option_string_actions.items()
            if o.startswith("--") and not getattr(action, "old_spelling", False)
        ]
        self.exit(2, f"{scope.prog}: error: {did_you_mean(message, options)} (see {scope.prog} --help)\n")

    def _command(self, argv: Sequence[str]) -> argparse.ArgumentParser:
        """The deepest subcommand parser the words of `argv` name (this parser when they name none)."""
        parser: argparse.ArgumentParser = self
        for word in argv:
            if word.startswith("-"):
                continue
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs or word not in subs[0].choices:
                continue
            parser = subs[0].choices[word]
        return parser


EXIT_BRIEF = (
    "exit status: 0 done, 1 runtime failure, 2 usage or input error, 3 --fail-on matched, 4 --max-cost reached, "
    "130/143 interrupted (--help-all: what each means)"
)


def mark_brief(parser: argparse.ArgumentParser, texts: dict[str, str | None]) -> None:
    """List these options (by their first flag) in the command's brief `--help`, each with its text (None: the
    first sentence of its help); `--help-all` shows every option in full."""
    for action in parser._actions:
        if action.option_strings and action.option_strings[0] in texts:
            text = texts[action.option_strings[0]]
            action.brief = text if text is not None else _first_sentence(action.help or "")  # type: ignore[attr-defined]


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    for end in (". ", "; ", " (default"):
        text = text.split(end, 1)[0]
    return text.rstrip(".")


def _brief_help(parser: argparse.ArgumentParser, actions: Sequence[argparse.Action]) -> str:
    width = max(60, min(shutil.get_terminal_size().columns, 120))
    lines = [f"usage: {parser.prog} [options]", ""]
    if parser.description:
        lines += [*textwrap.wrap(parser.description, width), ""]
    lines.append("common options (`--help-all`: every option, grouped, with its default):")
    for action in actions:
        name = action.option_strings[0]
        if action.nargs != 0 and action.metavar != argparse.SUPPRESS:
            name += f" {action.metavar or action.dest.upper()}"
        text = textwrap.wrap(getattr(action, "brief", ""), width=max(20, width - 34)) or [""]
        if len(name) > 30:
            lines.append(f"  {name}")
            name = ""
        lines += [f"  {name if n == 0 else '':<30}  {part}" for n, part in enumerate(text)]
    if parser.epilog:
        examples = parser.epilog.split("\n\n", 1)[0]
        lines += ["", examples]
        if EXIT_CODES in parser.epilog:
            lines += ["", *textwrap.wrap(EXIT_BRIEF, width)]
    return "\n".join(lines) + "\n"


def walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += walk(child)
    return found


def package_version() -> str:
    try:
        return version("markov-debate")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def add_command(
    sub: Subcommands, name: str, handler: Handler | None = None, *, extra: Extra | None = None, **kwargs: Any
) -> argparse.ArgumentParser:
    """A subcommand of `sub` (the subparsers a command-adding entry point receives) that follows these
    conventions; `handler` is what it runs. `extra`: the optional extra it (and every subcommand under it) needs;
    without it the command refuses in one line naming the install command, while its `--help` still works.
    Keyword arguments go to argparse (help, description, epilog)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    if handler is not None:
        parser.set_defaults(handler=handler)
    if extra is not None:
        parser.set_defaults(needs_extra=extra)
    return parser


def add_command_group(
    sub: Subcommands, name: str, *, dest: str, metavar: str, extra: Extra | None = None, **kwargs: Any
) -> Subcommands:
    """A subcommand with subcommands of its own (`debate eval halueval`): returns the subparsers to pass to
    `add_command` for each of them."""
    parser = add_command(sub, name, extra=extra, **kwargs)
    return parser.add_subparsers(dest=dest, required=True, parser_class=Parser, metavar=metavar)


class _QuietCancellation(logging.Filter):
    """Drops log records about a cancelled task: on Ctrl-C every running agent is cancelled and autogen's runtime
    logs each one as an error with its traceback; a cancellation is never an error to report."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return not (kind is not None and issubclass(kind, asyncio.CancelledError | KeyboardInterrupt))


class _UserFormatter(logging.Formatter):
    """A record from one of our modules names the package, not its private module (`debate`, not
    `debate.llm._embedded`): a user reads what happened, not where in the code; other libraries keep their name."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name.startswith(("debate.", "markov_debate.", "experiments.")) and "._" in record.name:
            record = logging.makeLogRecord({**record.__dict__, "name": record.name.split("._", 1)[0]})
        return super().format(record)


def log_handler(console: Console) -> logging.Handler:
    """On a terminal, log records go through the console the progress bar draws on, so a retry warning is printed
    above the live bar instead of breaking it; elsewhere (CI logs, pipes) there is no bar and lines stay whole."""
    if console.is_terminal:
        # RichHandler draws the level in a column of its own: the text must not repeat it
        handler: logging.Handler = RichHandler(
            console=console, show_time=False, show_path=False, markup=False, rich_tracebacks=False
        )
        handler.setFormatter(_UserFormatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(console.file)
        handler.setFormatter(_UserFormatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_QuietCancellation())
    return handler
