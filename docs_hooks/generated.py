"""MkDocs hook: the pages that are generated from the code, so they cannot drift from it.

`<!-- generated: cli-reference -->` becomes every command's `--help`, from the parser itself;
`<!-- generated: report-schema -->` the JSON schema of the Report, from the pydantic models.
"""

from __future__ import annotations

import json
import os
from typing import Any


def _cli_reference() -> str:
    os.environ["COLUMNS"] = "110"  # argparse wraps help to the terminal: a fixed width keeps the page stable
    from debate.cli import build_parser, walk

    parts = []
    for parser in walk(build_parser([])):
        heading = "#" * min(4, parser.prog.count(" ") + 2)
        parser.show_all = True  # type: ignore[attr-defined]  # the reference is --help-all, every option
        parts.append(f"{heading} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


def _report_schema() -> str:
    from debate.types import Report

    schema = json.dumps(Report.model_json_schema(), indent=2, ensure_ascii=False)
    return f"```json\n{schema}\n```\n"


_GENERATED = {"cli-reference": _cli_reference, "report-schema": _report_schema}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for name, make in _GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
