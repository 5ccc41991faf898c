"""`debate` command line: a thin layer over the Python API. Exit 0 done, 2 usage/config error, 1 runtime failure."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from debate.api import Verifier
from debate.batch import count_pending, fails_on, run_batch
from debate.chain import CHAINS, MarkovChain, explain_moves, load_chain
from debate.config import (
    ClaimConfig,
    DebateConfig,
    ModelConfig,
    PrefilterConfig,
    RetrievalConfig,
    SearchConfig,
    VerifierConfig,
)
from debate.errors import DebateError, InputError, ModelUnavailableError, UsageError
from debate.llm.cache import CACHE_FILE, DEFAULT_CACHE_DIR, cache_stats, clear_cache
from debate.prefilter.tools import (
    APIEndpointChecker,
    DestructiveActionChecker,
    FactChecker,
    PermissionChecker,
    ToolCallChecker,
    ToolRegistry,
    correction_message,
)
from debate.refchecker import write_refchecker
from debate.stages import PREFILTERS, RETRIEVERS, ROLLUPS, SEARCH_BACKENDS, TASKS
from debate.types import ClaimVerdict, Report
from debate.workers import resolve_workers

__all__ = [
    "COMMAND_ENTRY_POINT_GROUP",
    "UsageError",
    "add_verifier_arguments",
    "examples",
    "items_in_flight",
    "main",
    "secret_from_file",
    "verifier_config",
]

EXIT_CODES = """exit status:
  0  done (every verdict reached, whatever it is)
  1  runtime failure: the endpoint is unreachable, refuses every request (401/403/404), or failed N items in a
     row; finished batch records are kept, re-run the same command to resume
  2  usage, configuration or input error (one line on stderr)
  3  --fail-on matched a verdict (non-factual / unverifiable)
  130 interrupted (Ctrl-C); finished batch records are kept
  143 terminated (SIGTERM); finished batch records are kept"""

COMMAND_ENTRY_POINT_GROUP = "markov_debate.commands"
"""Entry points adding subcommands (a function taking the subparsers); each sets `handler` on its parser."""

_err = Console(stderr=True)
log = logging.getLogger(__name__)


def progress_bar(description: ProgressColumn, *extra: ProgressColumn) -> Progress:
    """The batch progress bar on stderr: redrawn twice a second at most (a redraw costs CPU the batch needs), and
    not drawn at all when stderr is not a terminal (CI logs, pipes)."""
    return Progress(
        description, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(), *extra,
        console=_err, refresh_per_second=2, disable=not _err.is_terminal,
    )  # fmt: skip


_out = Console()


def examples(*lines: str, extra: str = "") -> str:
    """A subcommand's epilog: its examples (each a command line, optionally `# what it does` first), then `extra`."""
    text = "examples:\n" + "\n".join(f"  {line}" for line in lines)
    return text + (f"\n\n{extra}" if extra else "")


class _Formatter(argparse.RawDescriptionHelpFormatter):
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
        return f"{text} (default: {_shown(action.default, flag=action.nargs == 0).replace('%', '%%')})"


def _shown(default: Any, *, flag: bool = False) -> str:
    """A default as help text shows it: "off" for an unset flag, "none" for no value, lists space-separated."""
    if default is None or default is False:
        return "off" if flag else "none"
    if isinstance(default, list | tuple):
        return " ".join(str(v) for v in default) or "none"
    return str(default)


_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")


def _did_you_mean(message: str, options: Sequence[str]) -> str:
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
                close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6)
                if close:
                    guesses.append(f"{close[0]} for {word}")
        if guesses:
            return f"{message}; did you mean {', '.join(guesses)}?"
    return message


class _Parser(argparse.ArgumentParser):
    """One-line errors (with "did you mean"), defaults shown in every option's help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        options = [o for parser in _walk(self) for o in parser._option_string_actions if o.startswith("--")]
        self.exit(2, f"{self.prog}: error: {_did_you_mean(message, options)} (see {self.prog} --help)\n")


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _walk(child)
    return found


def _package_version() -> str:
    try:
        return version("markov-debate")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _field(model: type[BaseModel], name: str) -> tuple[Any, str]:
    """A config field's default and description: the CLI's defaults and help come from the config models."""
    info = model.model_fields[name]
    default = info.get_default(call_default_factory=True)
    return default, " ".join((info.description or "").split())


def _opt(group: Any, flags: Sequence[str], model: type[BaseModel], name: str, **kwargs: Any) -> None:
    default, text = _field(model, name)
    shown = _shown(kwargs.pop("shown", default), flag=kwargs.get("action") == "store_true")
    group.add_argument(*flags, default=kwargs.pop("default", default), help=f"{text} (default: {shown})", **kwargs)


def add_verifier_arguments(
    parser: argparse.ArgumentParser, *, batch: bool = True, fixed: Mapping[str, Any] | None = None
) -> None:
    """The options every command that runs the engine shares (chain, model, claims, evidence, prefilters).

    `batch=False` leaves out --items and --workers (a command that runs no batch); `fixed` maps option names
    (dests, e.g. "min_rounds") the command sets itself to their values: those options are not offered, since
    they would do nothing."""
    fixed = dict(fixed or {})

    def opt(group: Any, flags: Sequence[str], model: type[BaseModel], name: str, **kwargs: Any) -> None:
        if kwargs.get("dest", flags[0].lstrip("-").replace("-", "_")) not in fixed:
            _opt(group, flags, model, name, **kwargs)

    claims = parser.add_argument_group("claims, evidence and rollup")
    opt(claims, ["--claim-format"], ClaimConfig, "format", choices=["sentence", "triplet"], dest="claim_format")
    opt(claims, ["--max-claims"], ClaimConfig, "max_claims", type=int)
    opt(claims, ["--retriever"], RetrievalConfig, "retriever", choices=RETRIEVERS.names())
    opt(claims, ["--top-k"], RetrievalConfig, "top_k", type=int)
    opt(claims, ["--retrieval-cache"], RetrievalConfig, "cache_dir", dest="retrieval_cache", metavar="DIR")
    claims.add_argument("--search-backend", choices=SEARCH_BACKENDS.names(),
                        help="search for claims without a reference (default: none, knowledge-free)")  # fmt: skip
    opt(claims, ["--search-url"], SearchConfig, "base_url", dest="search_url", metavar="URL")
    claims.add_argument("--search-key", help="Serper key (default: SERPER_API_KEY)")
    opt(claims, ["--collection"], SearchConfig, "collection", metavar="JSONL")
    opt(claims, ["--results-per-query"], SearchConfig, "results_per_query", type=int)
    opt(claims, ["--rollup"], VerifierConfig, "rollup", choices=ROLLUPS.names())
    pre = parser.add_argument_group("prefilters (cheap checks before the debate)")
    pre.add_argument(
        "--prefilter",
        default="none",
        metavar="none|all|NAME[,NAME...]",
        help=f"prefilters to run, in order: none, all, or a comma-separated list of {', '.join(PREFILTERS.names())} "
        "(default: none)",
    )
    pre.add_argument("--trust-grounded", action="store_true", help="let strongly grounded claims skip the debate")
    pre.add_argument(
        "--judge-two-step", action="store_true",
        help="rag-judge: a free-form, self-critical judgment first, then a second call converts it to JSON",
    )  # fmt: skip
    opt(pre, ["--judge-model"], PrefilterConfig, "judge_model", metavar="NAME")
    opt(pre, ["--grounded-confidence"], PrefilterConfig, "grounded_confidence", type=float)
    chain = parser.add_argument_group("chain")
    if "chain" not in fixed:
        chain.add_argument(
            "--chain",
            "--transition",
            dest="chain",
            metavar="NAME|FILE",
            default=_field(DebateConfig, "chain")[0],
            help=f"one of {', '.join(CHAINS.names())} (`debate chains` shows them), or a chain spec file "
            f"(default: {_field(DebateConfig, 'chain')[0]})",
        )
    opt(chain, ["--min-rounds"], DebateConfig, "min_rounds", type=int)
    opt(chain, ["--max-rounds"], DebateConfig, "max_rounds", type=int)
    opt(chain, ["--max-parse-retries"], DebateConfig, "max_parse_retries", type=int)
    model = parser.add_argument_group(
        "model (default: the embedded SmolLM2-135M; env OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL)"
    )
    model.add_argument("--base-url", metavar="URL",
                       help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
                            "(default: OPENAI_BASE_URL, else the embedded model)")  # fmt: skip
    model.add_argument("--model", help="model name (default: DEBATE_MODEL, else the endpoint's only model)")
    model.add_argument("--api-key", help="API key; visible to other users in `ps`, prefer --api-key-file or "
                       "OPENAI_API_KEY (default: OPENAI_API_KEY; needed for a hosted endpoint)")  # fmt: skip
    model.add_argument(
        "--api-key-file",
        type=Path,
        metavar="FILE",
        help="read the API key from FILE (its first line): it stays out of `ps` (default: none)",
    )
    opt(model, ["--temperature"], ModelConfig, "temperature", type=float, default=None)
    opt(model, ["--seed"], ModelConfig, "seed", type=int, default=None)
    opt(model, ["--structured-output"], ModelConfig, "structured_output",
        choices=["auto", "json_schema", "json_object", "none"], default=None)  # fmt: skip
    opt(model, ["--timeout"], ModelConfig, "timeout_s", type=float, default=None, dest="timeout", metavar="SECONDS")
    conc = parser.add_argument_group("concurrency")
    opt(conc, ["--concurrency"], ModelConfig, "max_concurrency", type=int, dest="concurrency")
    opt(conc, ["--claim-concurrency"], VerifierConfig, "claim_concurrency", type=int)
    if batch:
        conc.add_argument(
            "--items", type=int, default=None,
            help="responses (batch lines, benchmark items) in progress at once (default: 2 x --concurrency)",
        )  # fmt: skip
        conc.add_argument(
            "--workers", type=_workers, default=1, metavar="N|auto",
            help="processes for a batch (--input, debate eval), sharing --concurrency; auto = one per core "
            "(default: 1)",
        )  # fmt: skip
    if "prompt_set" not in fixed:
        _opt(parser, ["--prompt-set", "--prompts-dir"], VerifierConfig, "prompt_set", metavar="NAME|DIR")
    parser.set_defaults(**fixed)


def _workers(value: str) -> int:
    try:
        return resolve_workers(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {value!r}") from exc


def items_in_flight(args: argparse.Namespace) -> int:
    """--items, else twice the model concurrency: enough work queued to keep every model slot busy."""
    value = args.items if args.items is not None else 2 * max(1, args.concurrency)
    if value < 1:
        raise UsageError("--items must be at least 1")
    return int(value)


def _prefilters(value: str) -> list[str]:
    if value == "none":
        return []
    if value == "all":
        builtin = ["rules", "logprob"]
        return builtin + [n for n in PREFILTERS.names() if n not in builtin]
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if name not in PREFILTERS:
            raise UsageError(f"--prefilter: {PREFILTERS.unknown(name)}")
    return names


_BUILTIN_COMMANDS = frozenset({"verify", "check-tools", "chains", "cache"})


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; plugin commands (debate eval, ...) are loaded unless `argv` names a built-in command, whose
    start-up should not pay for importing them."""
    parser = _Parser(
        prog="debate", description="Detect hallucinations by Markov-chain multi-agent debate.",
        epilog=examples(
            'debate verify --question "Who wrote Hamlet?" --answer "Marlowe" --evidence @knowledge.txt',
            "debate verify --input answers.jsonl --output verdicts.jsonl --fail-on non-factual",
            "debate eval halueval --task qa          # the paper's QA protocol, 150 items",
            "debate COMMAND --help                   # every option of a command, with its default",
            extra=EXIT_CODES,
        ),
    )  # fmt: skip
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s (markov-debate) {_package_version()}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log retries, endpoint negotiation, server start-up (anywhere on the line)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    v = sub.add_parser(
        "verify", help="verify a response (or a JSONL batch of them)",
        description="Verify one response (--answer) or a JSONL batch (--input/--output) and print the report.",
        epilog=examples(
            "# one QA answer against its knowledge (text, or @FILE to read a file)",
            'debate verify --question "Who wrote Hamlet?" --answer "Christopher Marlowe" --evidence @knowledge.txt',
            "# a summary against its source document, only the claims table",
            "debate verify --task summarization --response @summary.txt --reference @article.txt --brief",
            "# a batch on your own endpoint; exit 3 when an answer is judged non-factual (CI gating)",
            "debate verify --input answers.jsonl --output verdicts.jsonl --base-url http://localhost:8000/v1 "
            "--fail-on non-factual",
            extra=EXIT_CODES,
        ),
    )  # fmt: skip
    v.add_argument(
        "--task",
        choices=TASKS.names(),
        default="qa",
        help="; ".join(f"{name}: {TASKS.describe(name).rstrip('.')}" for name in TASKS.names()) + " (default: qa)",
    )
    single = v.add_argument_group("one response")
    single.add_argument("--question", help="the question, as text or @FILE (dialogue: the dialogue history)")
    single.add_argument("--answer", "--response", dest="answer", help="the response to check, as text or @FILE")
    single.add_argument("--evidence", "--reference", dest="evidence",
                        help="knowledge or source document, as text or @FILE (default: none)")  # fmt: skip
    single.add_argument("--sources", metavar="FILE",
                        help="task rag: JSON file of {id: text} or [{id, text, parent_id}]")  # fmt: skip
    batch = v.add_argument_group("batch")
    batch.add_argument("--input", type=Path, metavar="JSONL",
                       help="JSONL with id, question, response, reference (or RefChecker's JSON array)")  # fmt: skip
    batch.add_argument("--output", type=Path, metavar="FILE",
                       help="JSONL to append results to (re-running resumes)")  # fmt: skip
    batch.add_argument(
        "--output-format", choices=["jsonl", "refchecker"], default="jsonl",
        help="jsonl: one report per line; refchecker: --output is RefChecker's JSON array (each input item with "
        "claims, Y and ys), written when the batch ends, and the resumable results log is --output + '.jsonl' "
        "(default: jsonl)",
    )  # fmt: skip
    batch.add_argument(
        "--aggregator", choices=["strict", "soft", "major"], default="soft",
        help="--output-format refchecker: RefChecker's aggregator for Y (default: soft, the share of each label, "
        "as in RefChecker)",
    )  # fmt: skip
    batch.add_argument(
        "--retry-failed", action=argparse.BooleanOptionalAction, default=True,
        help="on a re-run, redo items that failed for a transient reason (endpoint down) and input lines fixed "
        "since (default: on)",
    )  # fmt: skip
    batch.add_argument(
        "--max-consecutive-failures", type=int, default=5, metavar="N",
        help="stop (exit 1) after N items in a row fail because the endpoint is unavailable (default: 5)",
    )  # fmt: skip
    v.add_argument(
        "--fail-on", choices=["non-factual", "unverifiable", "any"], default=None,
        help="exit 3 when a verdict is non-factual, unverifiable, or either (for CI gating; default: off)",
    )  # fmt: skip
    add_verifier_arguments(v)
    shown = v.add_argument_group("output")
    shown.add_argument("--json", action="store_true", help="print the Report as JSON")
    shown.add_argument("--brief", action="store_true",
                       help="only the verdict and the claims summary (no evidence, chain or opinions)")  # fmt: skip
    shown.add_argument("--show-prompts", action="store_true",
                       help="print the exact messages each agent was sent, turn by turn")  # fmt: skip
    v.add_argument("--cache", type=Path, default=None, metavar="DIR",
                   help="keep model calls in DIR/calls.sqlite and replay them on a re-run (default: off)")  # fmt: skip
    cache = sub.add_parser(
        "cache", help="the model-call cache: stats or clear",
        epilog=examples("debate cache stats", "debate cache stats --cache results/embedded/.cache --json",
                        "debate cache clear --endpoint http://localhost:8000/v1"),
    )  # fmt: skip
    cache.add_argument("action", choices=["stats", "clear"], help="stats: entries per endpoint; clear: delete them")
    cache.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE_DIR,
        help=f"cache directory (default: {DEFAULT_CACHE_DIR}, where `debate eval` keeps its cache)",
    )  # fmt: skip
    cache.add_argument("--endpoint", metavar="URL",
                       help="clear: only the entries of this endpoint (base URL) (default: all)")  # fmt: skip
    cache.add_argument("--json", action="store_true", help="stats: print JSON")
    chains = sub.add_parser(
        "chains", help="list the registered chains (or show one chain file) as node/edge lists",
        epilog=examples("debate chains", "debate chains true-to-skeptic --json", "debate chains my-chain.toml"),
    )  # fmt: skip
    chains.add_argument("chain", nargs="?", help="a chain name or spec file to show (default: list all)")
    chains.add_argument("--json", action="store_true", help="print the graphs as JSON node/edge lists")
    tools = sub.add_parser(
        "check-tools", help="audit a tool call against JSON-schema tool definitions",
        epilog=examples(
            "debate check-tools --registry tools.json --call call.json",
            "debate check-tools --registry tools.json --call call.json --json --allow-endpoint https://api.example.com",
            extra="exit status: 0 no findings, 1 findings, 2 unreadable input",
        ),
    )  # fmt: skip
    tools.add_argument("--registry", type=Path, required=True, help="JSON list of tool definitions (OpenAI format)")
    tools.add_argument("--call", type=Path, required=True, help='JSON {"name", "arguments"} (or an OpenAI tool_call)')
    tools.add_argument("--json", action="store_true", help="print the findings as JSON")
    tools.add_argument(
        "--allow-endpoint", action="append", default=[], metavar="URL",
        help="a known API endpoint (repeatable; given: an api_call's endpoint must be one of them exactly, 0.85)",
    )  # fmt: skip
    tools.add_argument(
        "--endpoint-match", choices=["exact", "prefix"], default="exact",
        help="exact (seed 003) or prefix: any tool's URL-like argument must start with an allowed endpoint",
    )  # fmt: skip
    tools.add_argument(
        "--granted", action="append", default=None, metavar="PERMISSION",
        help="a permission the caller holds (repeatable; given: delete_database needs 'delete:database', 0.9)",
    )  # fmt: skip
    tools.add_argument(
        "--permission-check", choices=["seed", "destructive"], default="seed",
        help="seed (seed 003: the delete_database tool) or destructive: DROP/DELETE/TRUNCATE/ALTER in any tool "
        "need 'db:write'",
    )  # fmt: skip
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    if not (words and words[0] in _BUILTIN_COMMANDS):
        for entry in entry_points(group=COMMAND_ENTRY_POINT_GROUP):
            register: Callable[[Any], None] = entry.load()
            register(sub)
    for child in _walk(parser)[1:]:
        # Global options work after the subcommand too: SUPPRESS keeps a subcommand from resetting what was
        # given before it.
        child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                           help="log retries, endpoint negotiation and server start-up")  # fmt: skip
    return parser


def secret_from_file(path: Path, flag: str) -> str:
    """The first line of a secret file (a key, a database URL), for options that keep secrets out of `ps`."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    if not lines or not lines[0].strip():
        raise UsageError(f"{flag}: {path} is empty")
    return lines[0].strip()


def _api_key(args: argparse.Namespace) -> str | None:
    if getattr(args, "api_key_file", None) is not None:
        if args.api_key:
            raise UsageError("give --api-key or --api-key-file, not both")
        return secret_from_file(args.api_key_file, "--api-key-file")
    if args.api_key:
        log.warning("--api-key on the command line is visible to other users (ps); use --api-key-file or "
                    "OPENAI_API_KEY")  # fmt: skip
    key: str | None = args.api_key
    return key


def _read_text_arg(value: str | None, flag: str) -> tuple[str | None, str | None]:
    """A text option's value and where it came from: `@FILE` reads the file. A bare value that names an existing
    file is refused: it was almost certainly meant as @FILE, and judging the file *name* as the text would pass
    silently."""
    if value is None:
        return None, None
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    if "\n" not in value and len(value) < 4096 and Path(value).is_file():
        raise UsageError(f"{flag} {value}: that is a file; to read it, pass {flag} @{value}")
    return value, flag


def _read_json(path: Path, flag: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag}: {path} line {exc.lineno}: not valid JSON ({exc.msg})") from exc


def _cache(args: argparse.Namespace) -> int:
    path = args.cache / CACHE_FILE
    if args.action == "clear":
        deleted = clear_cache(path, endpoint=args.endpoint)
        _out.print(f"deleted {deleted} cached call(s) from {path}")
        return 0
    stats = cache_stats(path)
    if args.json:
        sys.stdout.write(stats.model_dump_json(indent=2) + "\n")
        return 0
    _out.print(f"{stats.path}: {stats.entries} cached calls, {stats.size_bytes / 1e6:.1f} MB")
    for where, n in sorted(stats.by_endpoint.items()):
        _out.print(f"  {n:8d}  {where}")
    return 0


def _chains(args: argparse.Namespace) -> int:
    names = [args.chain] if args.chain else CHAINS.names()
    chains = [load_chain(name) for name in names]
    graphs = [chain.to_dict() for chain in chains]
    if args.json:
        sys.stdout.write(json.dumps(graphs if not args.chain else graphs[0], indent=2) + "\n")
        return 0
    for name, chain, graph in zip(names, chains, graphs, strict=True):
        states = ", ".join(f"{n['id']} = {' -> '.join(n['roles'])}" for n in graph["nodes"])
        moves = ", ".join(
            f"{e['source']} --{'true' if e['verdict'] else 'false'}--> {e['target']}" for e in graph["edges"]
        )
        _out.print(f"[bold]{name}[/]: {chain.spec.description}\n  states: {states}\n  transitions: {moves}")
    return 0


def _check_tools(args: argparse.Namespace) -> int:
    try:
        registry = ToolRegistry.from_file(args.registry)
    except OSError as exc:
        raise UsageError(f"--registry: cannot read {args.registry}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"--registry {args.registry}: {exc}") from exc
    call = _read_json(args.call, "--call")
    body = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise UsageError(f'--call {args.call}: expected {{"name": ..., "arguments": ...}}')
    fact_checkers: list[FactChecker] = []
    if args.allow_endpoint:
        fact_checkers.append(APIEndpointChecker(args.allow_endpoint, match=args.endpoint_match))
    if args.granted is not None:
        permissions = PermissionChecker if args.permission_check == "seed" else DestructiveActionChecker
        fact_checkers.append(permissions(args.granted))
    findings = ToolCallChecker(registry, fact_checkers=fact_checkers).check(body["name"], body.get("arguments", {}))
    if args.json:
        sys.stdout.write(json.dumps([f.model_dump() for f in findings], indent=2) + "\n")
    elif findings:
        for f in findings:
            _out.print(f"[red]{f.kind}[/] ({f.confidence:.2f}): {f.evidence}\n  fix: {f.correction}")
        _out.print(f"\n{correction_message(findings)}")
    else:
        _out.print("[green]no findings[/]: the call matches its tool definition")
    return 1 if findings else 0


def verifier_config(args: argparse.Namespace) -> VerifierConfig:
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    try:
        return VerifierConfig(
            model=ModelConfig.from_env(
                base_url=args.base_url,
                model=args.model,
                api_key=_api_key(args),
                temperature=args.temperature,
                seed=args.seed,
                structured_output=args.structured_output,
                timeout_s=args.timeout,
                max_concurrency=args.concurrency,
            ),
            debate=DebateConfig(
                min_rounds=args.min_rounds,
                max_rounds=args.max_rounds,
                chain=args.chain,
                max_parse_retries=args.max_parse_retries,
            ),
            claim_concurrency=args.claim_concurrency,
            prompt_set=args.prompt_set,
            claims=ClaimConfig(format=args.claim_format, max_claims=args.max_claims,
                               max_parse_retries=args.max_parse_retries),
            retrieval=RetrievalConfig(retriever=args.retriever, top_k=args.top_k, cache_dir=args.retrieval_cache),
            search=None
            if args.search_backend is None
            else SearchConfig(
                backend=args.search_backend,
                base_url=args.search_url,
                api_key=args.search_key or os.environ.get("SERPER_API_KEY") or None,
                collection=args.collection,
                results_per_query=args.results_per_query,
            ),
            rollup=args.rollup,
            prefilter=PrefilterConfig(prefilters=_prefilters(args.prefilter), trust_grounded=args.trust_grounded,
                                      grounded_confidence=args.grounded_confidence,
                                      judge_two_step=args.judge_two_step, judge_model=args.judge_model),
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"invalid configuration{f' ({where})' if where else ''}: {first['msg']}") from exc


_COLOUR = {
    "factual": "green", "non_factual": "red", "not_enough_evidence": "magenta", "unverifiable": "yellow",
    "no_claims": "blue",
}  # fmt: skip


def _excerpt(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(text: str) -> None:
    _out.print(text, markup=False, highlight=False, soft_wrap=True)


def _claim_label(claim: ClaimVerdict) -> str:
    return claim.status if claim.status == "unverifiable" or claim.label is None else claim.label


def _render(report: Report, *, brief: bool = False, show_prompts: bool = False) -> None:
    """The readable report, in the order an auditor reads it: the verdict, a summary of every claim with where it
    sits in the response, then (unless `brief`) per claim the evidence the agents saw, the chain with why it
    moved, and the opinions."""
    score = "n/a" if report.score is None else f"{report.score:.2f}"
    colour = _COLOUR[report.verdict]
    _out.print(Panel.fit(f"[bold {colour}]{report.verdict.upper()}[/]  score {score}  (rollup {report.rollup})",
                         title="verdict"))  # fmt: skip
    _plain(f"task: {report.task}   claims: {len(report.claims)} ({report.extraction.method})")
    if report.failure is not None:
        _plain(f"failed ({report.failure.kind}, {report.failure.stage}): {report.failure.message}")
    elif report.note:
        _plain(f"note: {report.note}")
    if report.claims:
        summary = Table(title="claims", title_justify="left", show_edge=False)
        for column in ("#", "label", "sev", "decided by", "claim", "in the response"):
            summary.add_column(column, overflow="fold")
        for index, claim in enumerate(report.claims, 1):
            label = _claim_label(claim)
            where = "; ".join(f"[{s.start}:{s.end}] {_excerpt(report.response[s.start : s.end], 50)!r}"
                              for s in claim.spans) or "-"  # fmt: skip
            summary.add_row(
                str(index), f"[{_COLOUR.get(label, 'white')}]{label}[/]",
                "-" if claim.error_severity is None else str(claim.error_severity),
                claim.decided_by, escape(_excerpt(claim.text, 70)), escape(where),
            )  # fmt: skip
        _out.print(summary)
    for dropped in report.extraction.dropped:
        _plain(f"dropped (nothing in the response supports it): {dropped!r}")
    if brief:
        _usage_line(report)
        return
    if report.prefilter is not None:
        _render_prefilter(report)
    chain = _report_chain(report)
    for index, claim in enumerate(report.claims, 1):
        _render_claim(index, claim, chain, show_prompts=show_prompts)
    _usage_line(report)


def _report_chain(report: Report) -> MarkovChain | None:
    """The chain the report ran with, to check each move against its rule; None if it cannot be loaded here."""
    name = str(report.meta.config.get("debate", {}).get("chain", "true-to-skeptic"))
    try:
        return load_chain(name)
    except (DebateError, OSError, ValueError):
        return None


def _render_prefilter(report: Report) -> None:
    p = report.prefilter
    assert p is not None
    _plain(
        f"prefilter ({', '.join(p.prefilters)}): {p.decided} claims decided without debate, "
        f"{p.prefilter_calls} prefilter calls, "
        f"at least {p.debate_calls_saved} debate calls saved ({p.net_calls_saved:+d} net of the prefilter calls)"
        + (f"; {p.note}" if p.note else "")
    )
    for check in p.checks:
        _plain(f"{check.name}: risk {check.risk_level}: {check.reason}")
        if check.judge is not None and check.judge.rubric is not None:
            r = check.judge.rubric
            _plain(
                f"  judge: {r.decision} (score {r.score:.2f}, confidence {r.confidence:.2f}, hallucination_risk "
                f"{r.hallucination_risk:.2f}); notes: {r.hallucination_notes.strip() or '(none)'}"
            )
        if check.judge is not None and check.judge.action is not None:
            _plain(f"  action: {check.judge.action} (combined risk {check.judge.combined_risk})")
        if check.hallucination_check is not None and check.hallucination_check.warning:
            _plain(f"  warning: {check.hallucination_check.warning}")


def _render_claim(index: int, claim: ClaimVerdict, chain: MarkovChain | None, *, show_prompts: bool) -> None:
    label = _claim_label(claim)
    _out.print(f"\n[bold]claim {index}[/] ({claim.claim_id}): {escape(claim.text)}", highlight=False)
    if claim.status == "unverifiable":
        kind = f" ({claim.failure.kind})" if claim.failure is not None else ""
        _out.print(f"  [yellow]unverifiable[/]{kind}: {escape(claim.reason or '')}", highlight=False)
    else:
        _out.print(f"  [{_COLOUR.get(label, 'white')}]{label}[/]   error severity: {claim.error_severity}"
                   f"   decided by: {claim.decided_by}")  # fmt: skip
    if claim.evidence:
        _plain(f"  evidence ({len(claim.evidence)}):")
        for number, item in enumerate(claim.evidence, 1):
            source = f" [{item.kind}: {item.source}]" if item.source else f" [{item.kind}]"
            _plain(f"    [{number}] {_excerpt(item.text, 200)}{source}")
    else:
        _plain("  evidence: none (judged from the model's own knowledge)")
    for decision in claim.prefilters:
        _plain(f"  prefilter {decision.name}: {decision.decision} ({decision.reason})")
    if claim.debate is None:
        return
    d = claim.debate
    consensus = "n/a" if d.consensus is None else str(d.consensus).lower()
    moves = explain_moves(d, chain)
    path = "  ".join(f"{s.name}" + (f" ({why})" if why else "") for s, why in zip(d.states, moves, strict=True))
    _plain(f"  chain: {path}")
    _plain(f"  rounds: {d.rounds}   consensus: {consensus}   stopped: {d.stop_reason}")
    table = Table(show_lines=True)
    for column in ("state", "round", "agent", "factual", "sev", "opinion"):
        table.add_column(column, overflow="fold")
    for state in d.states:
        for turn in state.turns:
            table.add_row(
                state.name, str(state.round), turn.role,
                "-" if turn.factuality is None else str(turn.factuality),
                "-" if turn.error_severity is None else str(turn.error_severity),
                escape(turn.opinion or "") if turn.error is None else f"[yellow]{escape(turn.error or '')}[/]",
            )  # fmt: skip
    _out.print(table)
    if show_prompts:
        for state in d.states:
            for turn in state.turns:
                _out.print(f"  [bold]{state.name} round {state.round} {turn.role}[/] "
                           f"(prompt {turn.call.prompt} {turn.call.prompt_hash[:12]})")  # fmt: skip
                for message in turn.call.messages or []:
                    _plain(f"    --- {message.role} ---")
                    _plain("\n".join(f"    {line}" for line in message.content.splitlines()))


def _usage_line(report: Report) -> None:
    u = report.usage
    _plain(
        f"model: {report.meta.model}   calls: {u.llm_calls}   tokens: {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion   time: {report.elapsed_s:.1f}s"
    )


async def _verify(args: argparse.Namespace) -> int:
    config = verifier_config(args)
    if args.cache is not None:
        config = config.model_copy(update={"call_cache": str(args.cache / CACHE_FILE)})
    if args.show_prompts:
        config = config.model_copy(update={"debate": config.debate.model_copy(update={"record_prompts": True})})
    batch_mode = args.input is not None or args.output is not None
    if batch_mode:
        if args.input is None or args.output is None:
            raise UsageError("batch mode needs both --input and --output")
        if args.answer is not None or args.question is not None or args.evidence is not None:
            raise UsageError("--input/--output cannot be combined with --question/--answer/--evidence")
        if not args.input.is_file():
            raise UsageError(f"--input: no such file: {args.input}")
        _check_output(args.input, args.output)
        args.results_log = args.output if args.output_format == "jsonl" else Path(f"{args.output}.jsonl")
        if args.max_consecutive_failures < 1:
            raise UsageError("--max-consecutive-failures must be at least 1")
    answer, _ = _read_text_arg(args.answer, "--answer")
    question, _ = _read_text_arg(args.question, "--question")
    if not batch_mode and (answer is None or not answer.strip()):
        raise UsageError("give a non-empty --answer (with --question and --evidence), or --input and --output")
    evidence, evidence_source = (None, None) if batch_mode else _read_text_arg(args.evidence, "--evidence")
    reference: Any = evidence
    if args.task == "rag" and not batch_mode:
        if args.sources is None:
            raise UsageError("--task rag needs --sources FILE (JSON {id: text} or [{id, text, parent_id}])")
        reference = _read_json(Path(args.sources), "--sources")

    if batch_mode:
        todo, done = count_pending(args.input, args.results_log, retry_failed=args.retry_failed)
        if todo == 0:
            # Nothing to do: no model is started and no endpoint is asked.
            _write_output_format(args)
            print(f"done: 0 written, {done} already done -> {args.output}", file=sys.stderr)
            return 0
    async with Verifier(config=config) as verifier:
        where = "embedded llama.cpp" if verifier.embedded else config.model.base_url
        _err.print(f"[dim]model: {verifier.client.model_name} ({where})[/]")
        if batch_mode:
            return await _run_batch(verifier, args)
        assert answer is not None  # checked above
        try:
            report = await verifier.verify(
                answer, question=question, reference=reference, reference_source=evidence_source, task=args.task
            )
        except InputError as exc:
            raise UsageError(str(exc)) from exc
    if args.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _render(report, brief=args.brief, show_prompts=args.show_prompts)
    transient = [f for f in [report.failure, *(c.failure for c in report.claims)] if f is not None and f.transient]
    if transient:
        raise ModelUnavailableError(f"the endpoint is unavailable ({transient[0].message}); no verdict was reached")
    return 3 if fails_on({"result": {"verdict": report.verdict}}, args.fail_on) else 0


def _check_output(source: Path, output: Path) -> None:
    """Refuse, in one line, an output that would overwrite the input or cannot be written."""
    if output.resolve() == source.resolve() or (output.exists() and output.samefile(source)):
        raise UsageError(f"--input and --output are the same file ({output}); results need their own file")
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; give a file path")
    parent = output.parent
    for ancestor in [parent, *parent.parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise UsageError(f"--output {output}: {ancestor} is a file, not a directory")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with output.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write there ({exc.strerror})") from exc


def _write_output_format(args: argparse.Namespace) -> None:
    if args.output_format == "refchecker":
        with args.results_log.open("rb") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        rates = write_refchecker(records, args.output, args.aggregator)
        shares = ", ".join(f"{label} {rate:.3f}" for label, rate in rates.rates.items())
        _plain(
            f"RefChecker rates over {rates.responses} responses: {shares}"
            + (f" ({rates.excluded} left out: an error or a failed claim)" if rates.excluded else "")
        )


class BatchProgress(logging.Handler):
    """Verdict counts and retries for the progress bar: a logging handler on the retry logger counts retries
    (their warnings are printed above the bar by the console's handler, not through it)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.verdicts: dict[str, int] = {}
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.retries += 1

    def add(self, record: dict[str, Any]) -> None:
        result = record.get("result")
        verdict = result.get("verdict") if isinstance(result, dict) else "error"
        self.verdicts[str(verdict)] = self.verdicts.get(str(verdict), 0) + 1

    def text(self) -> str:
        counts = " ".join(f"{name} {n}" for name, n in sorted(self.verdicts.items()))
        return counts + (f"  retries {self.retries}" if self.retries else "")


async def _run_batch(verifier: Verifier, args: argparse.Namespace) -> int:
    with args.input.open("rb") as fh:
        total = sum(1 for line in fh if line.strip())
    progress = progress_bar(TextColumn("[progress.description]{task.description}"), TextColumn("{task.fields[counts]}"))
    counter = BatchProgress()
    retry_log = logging.getLogger("debate.retry")
    retry_log.addHandler(counter)
    try:
        with progress:
            task = progress.add_task("verifying", total=total, counts="")

            def advance(record: dict[str, Any]) -> None:
                counter.add(record)
                progress.update(task, advance=1, counts=counter.text())

            summary = await run_batch(
                verifier=verifier,
                input_path=args.input,
                output_path=args.results_log,
                items_in_flight=items_in_flight(args),
                workers=args.workers,
                task=args.task,
                retry_failed=args.retry_failed,
                max_consecutive_failures=args.max_consecutive_failures,
                fail_on=args.fail_on,
                on_record=advance,
            )
            progress.update(task, completed=summary.processed + summary.skipped_done)
    finally:
        retry_log.removeHandler(counter)
    _write_output_format(args)
    print(
        f"done: {summary.processed} written ({summary.factual} factual, {summary.non_factual} non-factual, "
        f"{summary.unverifiable} unverifiable, {summary.failed} failed, {summary.errors} errors), "
        f"{summary.redone} redone, {summary.skipped_done} already done -> {args.output}",
        file=sys.stderr,
    )
    if summary.fail_on_matched:
        print(f"--fail-on {args.fail_on}: {summary.fail_on_matched} record(s) matched", file=sys.stderr)
        return 3
    return 0


INTERRUPTED = "debate: interrupted; finished records are kept"


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so that a `kill` stops the same orderly way: tasks are cancelled,
    the embedded model server is stopped, finished records are kept."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


class _QuietCancellation(logging.Filter):
    """Drops log records about a cancelled task: on Ctrl-C every running agent is cancelled and autogen's runtime
    logs each one as an error with its traceback; a cancellation is never an error to report."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return not (kind is not None and issubclass(kind, asyncio.CancelledError | KeyboardInterrupt))


def _log_handler(console: Console) -> logging.Handler:
    """On a terminal, log records go through the console the progress bar draws on, so a retry warning is printed
    above the live bar instead of breaking it; elsewhere (CI logs, pipes) there is no bar and lines stay whole."""
    if console.is_terminal:
        # RichHandler draws the level in a column of its own: the text must not repeat it
        handler: logging.Handler = RichHandler(console=console, show_time=False, show_path=False, markup=False,
                                               rich_tracebacks=False)  # fmt: skip
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(console.file)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_QuietCancellation())
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `debate` command; Ctrl-C at any moment is one line and exit 130."""
    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)
        return _main(argv)
    except KeyboardInterrupt as exc:
        logging.disable(logging.CRITICAL)  # nothing the shutdown logs after this is news to the user
        terminated = isinstance(exc, _Terminated)
        print(INTERRUPTED.replace("interrupted", "terminated") if terminated else INTERRUPTED, file=sys.stderr)
        return 143 if terminated else 130


def _main(argv: Sequence[str] | None) -> int:
    args = _build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[_log_handler(_err)],
                        force=True)  # fmt: skip
    try:
        if args.command == "verify":
            return asyncio.run(_verify(args))
        if args.command == "check-tools":
            return _check_tools(args)
        if args.command == "chains":
            return _chains(args)
        if args.command == "cache":
            return _cache(args)
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is not None:
            return handler(args)
        raise UsageError(f"unknown command {args.command}")  # pragma: no cover - argparse rejects it first
    except (UsageError, InputError) as exc:
        print(f"debate: error: {exc.for_cli()}", file=sys.stderr)
        return 2
    except DebateError as exc:
        print(f"debate: error: {exc.for_cli()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
