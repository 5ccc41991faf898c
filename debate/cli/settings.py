"""`debate config show`: the configuration a command line resolves to, and where each value came from."""

from __future__ import annotations

import argparse
import json
from typing import Any

from debate.cli.conventions import Subcommands, add_command_group, examples, out
from debate.cli.fields import FIELDS
from debate.cli.layers import config_data, config_digest, config_toml
from debate.cli.options import add_verifier_arguments, resolved_config

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add `debate config show` to the `debate` parser's subcommands."""
    config = add_command_group(
        sub,
        "config",
        dest="config_command",
        metavar="ACTION",
        help="the configuration: show what a command resolves to",
    )
    show = config.add_parser(
        "show",
        help="print the resolved configuration and where each value came from (default, file, environment, flag)",
        epilog=examples(
            "debate config show --debate.min_rounds 3",
            "# a config file that reloads to the same configuration",
            "debate config show --format toml > debate.toml",
            "debate verify --config debate.toml --answer ...",
        ),
    )
    show.add_argument(
        "--format",
        choices=["text", "toml", "json"],
        default="text",
        help="text: every field with its value and source; toml: a config file (`--config` reads it back); json: "
        "values, sources and digest",
    )
    add_verifier_arguments(show, batch=False)
    show.set_defaults(handler=_show)


def _show(args: argparse.Namespace) -> int:
    resolved = resolved_config(args)
    digest = config_digest(resolved.config)
    if args.format == "toml":
        out.print(config_toml(resolved.config), markup=False, highlight=False, soft_wrap=True, end="")
        return 0
    if args.format == "json":
        data = {"config": config_data(resolved.config), "sources": resolved.sources, "digest": digest}
        out.print(json.dumps(data, indent=2), markup=False, highlight=False, soft_wrap=True)
        return 0
    values = resolved.config.model_dump(mode="python")
    width = max(len(path) for path in FIELDS)
    for path, field in FIELDS.items():
        shown = _value(values, path, secret=field.secret)
        out.print(
            f"{path:<{width}} = {shown}  ({resolved.sources[path]})", markup=False, highlight=False, soft_wrap=True
        )
    out.print(f"digest: {digest}", markup=False, highlight=False)
    return 0


def _value(values: dict[str, Any], path: str, *, secret: bool) -> str:
    node: Any = values
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if secret:
        return "(not set)" if node is None else "(set, not shown)"
    return json.dumps(node, default=str)
