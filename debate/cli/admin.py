"""The small commands: `debate cache`, `debate chains` and `debate check-tools`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from debate.cli.conventions import Subcommands, add_command, examples, out
from debate.cli.inputs import read_json
from debate.errors import InputError, UsageError
from debate.llm import CACHE_FILE, DEFAULT_CACHE_DIR, cache_stats, clear_cache
from debate.plugins import CHAINS

if TYPE_CHECKING:
    from debate.prefilter import FactChecker

# The engine and the tool-call checks are imported by the commands that run them, not to build `debate --help`.

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the commands to the `debate` parser's subcommands."""
    _register_cache(sub)
    _register_chains(sub)
    _register_check_tools(sub)


def _register_cache(sub: Subcommands) -> None:
    cache = add_command(
        sub,
        "cache",
        _cache,
        help="the model-call cache: stats or clear",
        epilog=examples(
            "debate cache stats",
            "debate cache stats --cache results/embedded/.cache --json",
            "debate cache clear --endpoint http://localhost:8000/v1",
        ),
    )
    cache.add_argument("action", choices=["stats", "clear"], help="stats: entries per endpoint; clear: delete them")
    cache.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help=f"cache directory (default: {DEFAULT_CACHE_DIR}, where `debate eval` keeps its cache)",
    )
    cache.add_argument(
        "--endpoint", metavar="URL", help="clear: only the entries of this endpoint (base URL) (default: all)"
    )
    cache.add_argument("--json", action="store_true", help="stats: print JSON")


def _register_chains(sub: Subcommands) -> None:
    chains = add_command(
        sub,
        "chains",
        _chains,
        help="list the registered chains (or show one chain file) as node/edge lists",
        epilog=examples("debate chains", "debate chains true-to-skeptic --json", "debate chains my-chain.toml"),
    )
    chains.add_argument("chain", nargs="?", help="a chain name or spec file to show (default: list all)")
    chains.add_argument("--json", action="store_true", help="print the graphs as JSON node/edge lists")


def _register_check_tools(sub: Subcommands) -> None:
    tools = add_command(
        sub,
        "check-tools",
        _check_tools,
        help="audit a tool call against JSON-schema tool definitions",
        epilog=examples(
            "debate check-tools --registry tools.json --call call.json",
            "debate check-tools --registry tools.json --call call.json --json --allow-endpoint https://api.example.com",
            extra="exit status: 0 no findings, 1 findings, 2 unreadable input",
        ),
    )
    tools.add_argument("--registry", type=Path, required=True, help="JSON list of tool definitions (OpenAI format)")
    tools.add_argument("--call", type=Path, required=True, help='JSON {"name", "arguments"} (or an OpenAI tool_call)')
    tools.add_argument("--json", action="store_true", help="print the findings as JSON")
    tools.add_argument(
        "--allow-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="a known API endpoint (repeatable; given: an api_call's endpoint must be one of them exactly, 0.85)",
    )
    tools.add_argument(
        "--endpoint-match",
        choices=["exact", "prefix"],
        default="exact",
        help="exact (the tool-call checks) or prefix: any tool's URL-like argument must start with an allowed endpoint",
    )
    tools.add_argument(
        "--granted",
        action="append",
        default=None,
        metavar="PERMISSION",
        help="a permission the caller holds (repeatable; given: delete_database needs 'delete:database', 0.9)",
    )
    tools.add_argument(
        "--language",
        choices=["en", "zh"],
        default="en",
        help="the findings' and correction's words: en (our English) or zh (the tool-call source's Chinese exactly)",
    )
    tools.add_argument(
        "--permission-check",
        choices=["seed", "destructive"],
        default="seed",
        help="seed (the tool-call checks: the delete_database tool) or destructive: DROP/DELETE/TRUNCATE/ALTER in any "
        "tool "
        "need 'db:write'",
    )


def _cache(args: argparse.Namespace) -> int:
    path = args.cache / CACHE_FILE
    if args.action == "clear":
        deleted = clear_cache(path, endpoint=args.endpoint)
        out.print(f"deleted {deleted} cached call(s) from {path}")
        return 0
    stats = cache_stats(path)
    if args.json:
        sys.stdout.write(stats.model_dump_json(indent=2) + "\n")
        return 0
    out.print(f"{stats.path}: {stats.entries} cached calls, {stats.size_bytes / 1e6:.1f} MB")
    for where, n in sorted(stats.by_endpoint.items()):
        out.print(f"  {n:8d}  {where}")
    return 0


def _chains(args: argparse.Namespace) -> int:
    from debate.engine import load_chain

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
        out.print(f"[bold]{name}[/]: {chain.spec.description}\n  states: {states}\n  transitions: {moves}")
    return 0


def _check_tools(args: argparse.Namespace) -> int:
    from debate.prefilter import (
        APIEndpointChecker,
        DestructiveActionChecker,
        PermissionChecker,
        ToolCallChecker,
        ToolRegistry,
        correction_message,
    )

    try:
        registry = ToolRegistry.from_file(args.registry, "--registry")
    except InputError as exc:
        raise UsageError(
            str(exc) if str(exc).startswith("--registry") else f"--registry {args.registry}: {exc}"
        ) from exc
    call = read_json(args.call, "--call")
    body = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise UsageError(f'--call {args.call}: expected {{"name": ..., "arguments": ...}}')
    fact_checkers: list[FactChecker] = []
    if args.allow_endpoint:
        fact_checkers.append(APIEndpointChecker(args.allow_endpoint, match=args.endpoint_match, language=args.language))
    if args.granted is not None:
        seed = args.permission_check == "seed"
        fact_checkers.append(
            PermissionChecker(args.granted, language=args.language) if seed else DestructiveActionChecker(args.granted)
        )
    checker = ToolCallChecker(registry, fact_checkers=fact_checkers, language=args.language)
    findings = checker.check(body["name"], body.get("arguments", {}))
    if args.json:
        sys.stdout.write(json.dumps([f.model_dump() for f in findings], indent=2) + "\n")
    elif findings:
        for f in findings:
            out.print(f"[red]{f.kind}[/] ({f.confidence:.2f}): {escape(f.evidence)}\n  fix: {escape(f.correction)}")
        out.print(f"\n{correction_message(findings, args.language)}", markup=False)
    else:
        out.print("[green]no findings[/]: the call matches its tool definition")
    return 1 if findings else 0
