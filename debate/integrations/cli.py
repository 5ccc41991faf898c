"""`debate export phoenix PATH`: a finished results log into Phoenix (debate.integrations.phoenix)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from debate.cli.conventions import Subcommands, add_command_group, err, examples

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add `export` (phoenix) to the `debate` subcommands."""
    export_sub = add_command_group(
        sub,
        "export",
        dest="export_command",
        metavar="TARGET",
        help="send finished results to another tool (phoenix)",
        description="Finished results into the tools users already work in.",
    )
    phoenix = export_sub.add_parser(
        "phoenix",
        help="a results log, run folder or desk export as Phoenix traces with evaluations and human annotations",
        description="Each response becomes a trace with a span per claim; verdicts are sent as "
        "gen_ai.evaluation.result events and as Phoenix span annotations (annotator LLM), and a desk export's "
        "reviews as annotations by a HUMAN annotator. Needs the otel extra.",
        epilog=examples(
            "debate export phoenix verdicts.jsonl",
            "debate export phoenix runs/halueval-qa --url http://127.0.0.1:6006 --project halueval",
            "debate export phoenix desk-export.jsonl   # reviews become human annotations",
        ),
    )
    phoenix.add_argument("path", type=Path, help="a results log (.jsonl), a run folder, or a desk JSONL export")
    phoenix.add_argument(
        "--url",
        default=None,
        help="Phoenix's base URL (default: PHOENIX_COLLECTOR_ENDPOINT, else http://127.0.0.1:6006); "
        "PHOENIX_API_KEY is sent when set",
    )
    phoenix.add_argument("--project", default="markov-debate", help="the Phoenix project (default: markov-debate)")
    phoenix.set_defaults(handler=_phoenix)


def _phoenix(args: argparse.Namespace) -> int:
    from debate.integrations.phoenix import DEFAULT_PHOENIX_URL, export_to_phoenix

    url = args.url or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or DEFAULT_PHOENIX_URL
    summary = export_to_phoenix(args.path, url=url, project=args.project)
    for line in summary.skipped:
        err.print(f"[yellow]skipped[/] {line}")
    err.print(
        f"sent {summary.traces} trace(s), {summary.spans} span(s) and {summary.annotations} annotation(s) "
        f"({summary.human} human) to {url}, project {args.project}"
    )
    return 1 if summary.skipped and summary.traces == 0 else 0
