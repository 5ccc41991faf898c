"""`debate config show`: the configuration a command line resolves to, and where each value came from."""

from __future__ import annotations

import argparse
import json
from typing import Any

from debate.cli.conventions import Subcommands, add_command_group, examples, out
from debate.cli.fields import FIELDS
from debate.cli.layers import config_data, config_digest, config_toml
from debate.cli.options import add_verifier_arguments, resolved_config
from debate.config import VerifierConfig

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
            "debate config show --debate.min-rounds 3",
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
    from debate.engine import load_chain

    # What verify would refuse is refused here: a role the chain lacks would print as though it ran.
    load_chain(resolved.config.debate.chain).check_roles(resolved.config.named_roles())
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
    for path in secret_paths(resolved.config):
        out.print(f"{path:<{width}} = (set, not shown)", markup=False, highlight=False, soft_wrap=True)
    for path, value, source in stage_option_lines(resolved.config):
        out.print(f"{path:<{width}} = {value}  ({source})", markup=False, highlight=False, soft_wrap=True)
    out.print(f"digest: {digest}", markup=False, highlight=False)
    return 0


def secret_paths(config: VerifierConfig) -> list[str]:
    """Each role's and cascade team's key that is set (`model.api_key` is a field of its own): never shown, but
    said, as `[model]`'s is."""
    given = [(f"roles.{role}.model", r.model) for role, r in config.roles.items()]
    for team in config.debate.cascade:
        given.append((f"debate.cascade.{team.name}.model", team.model))
        given += [(f"debate.cascade.{team.name}.roles.{role}.model", r.model) for role, r in team.roles.items()]
    return [f"{where}.api_key" for where, model in given if model.api_key is not None]


def stage_option_lines(config: VerifierConfig) -> list[tuple[str, str, str]]:
    """(path, value as JSON, where it came from) for every option of each stage this configuration runs: its
    prefilters', its rollup's and every task's (a batch line picks its task), each with its default unless given."""
    from debate.plugins import PREFILTERS, ROLLUPS, TASKS, stage_options
    from debate.registry import Registry

    stages: list[tuple[str, Registry[Any], str, dict[str, dict[str, Any]]]] = [
        *(("prefilter.options", PREFILTERS, name, config.prefilter.options) for name in config.prefilter.prefilters),
        ("rollup_options", ROLLUPS, config.rollup, config.rollup_options),
        *(("task_options", TASKS, name, config.task_options) for name in TASKS.names()),
    ]
    lines = []
    for where, registry, name, given in stages:
        model = stage_options(registry, name)
        if model is None:
            continue
        chosen = given.get(name, {})
        values = model.model_validate(chosen).model_dump(mode="json")
        for key, value in values.items():
            source = "given" if key in chosen else "the stage's default"
            lines.append((f"{where}.{name}.{key}", json.dumps(value), source))
    return lines


def _value(values: dict[str, Any], path: str, *, secret: bool) -> str:
    node: Any = values
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if secret:
        return "(not set)" if node is None else "(set, not shown)"
    return json.dumps(node, default=str)
