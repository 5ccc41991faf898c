"""The options shared by every command that runs the engine, and how they become a VerifierConfig: one flag per
configuration field, spelled as the field is (debate.cli.fields), resolved in layers with `--config FILE` and the
environment (debate.cli.layers), so the CLI, the config file and the Python API cannot drift apart."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from debate.cli.aliases import add_old_spellings
from debate.cli.fields import add_config_flags
from debate.cli.inputs import secret_from_file
from debate.cli.layers import ResolvedConfig, resolve_config
from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.plugins import check_config
from debate.workers import resolve_workers

__all__ = [
    "add_verifier_arguments",
    "items_in_flight",
    "resolved_config",
    "verifier_config",
]

log = logging.getLogger("debate.cli")


def add_verifier_arguments(
    parser: argparse.ArgumentParser, *, batch: bool = True, fixed: Mapping[str, Any] | None = None
) -> None:
    """The options every command that runs the engine shares: `--config FILE`, one flag per configuration field
    (`--debate.min-rounds`, `--model.base-url`, ...; `--help` shows the common ones, `--help-all` every one) and
    the key file.

    `batch=False` leaves out --items and --workers (a command that runs no batch); `fixed` maps field paths the
    command sets itself (e.g. "debate.min_rounds") to their values: those options are not offered, since they would
    do nothing."""
    fixed = dict(fixed or {})
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a TOML file of settings, keys as the flags are named ([debate] min_rounds = 3); flags and the "
        "environment win over it (`debate config show` prints what a command resolves to)",
    )
    parser.add_argument(
        "--api-key-file",
        type=Path,
        metavar="FILE",
        help="read model.api_key from FILE (its first line): it stays out of `ps` (default: none)",
    )
    add_config_flags(parser, fixed=fixed)
    add_old_spellings(parser, fixed=fixed)
    if batch:
        conc = parser.add_argument_group("batch concurrency")
        conc.add_argument(
            "--items",
            type=positive_int,
            default=None,
            help="responses (batch lines, benchmark items) in progress at once (default: 2 x model.max_concurrency)",
        )
        conc.add_argument(
            "--workers",
            type=_workers,
            default=1,
            metavar="N|auto",
            help="processes for a batch (--input, debate eval), sharing model.max_concurrency; auto = one per core "
            "(default: 1)",
        )
    parser.set_defaults(config_fixed=fixed)


def positive_int(value: str) -> int:
    """A whole number from 1, read as a configuration field's are (3, 3.0, 1_000), and checked as the option is
    read (a command that never uses it still refuses it)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        number = TypeAdapter(int).validate_python(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value!r}")
    return number


def _workers(value: str) -> int:
    try:
        return resolve_workers(value)
    except (ValueError, UsageError) as exc:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {value!r}") from exc


def items_in_flight(args: argparse.Namespace, config: VerifierConfig) -> int:
    """--items, else twice the model concurrency: enough work queued to keep every model slot busy."""
    value = args.items if args.items is not None else 2 * config.model.max_concurrency
    if value < 1:
        raise UsageError("--items must be at least 1")
    return int(value)


def resolved_config(args: argparse.Namespace) -> ResolvedConfig:
    """The configuration the command line, its `--config` file and the environment resolve to, with each value's
    source; every stage name checked against its registry.

    Raises:
        UsageError: a value no field takes, named by its flag, file key or variable.
    """
    flags = dict(getattr(args, "config_flags", None) or {})
    key_file = getattr(args, "api_key_file", None)
    if key_file is not None:
        if "model.api_key" in flags:
            raise UsageError(f"give {flags['model.api_key'][1]} or --api-key-file, not both")
        flags["model.api_key"] = (secret_from_file(key_file, "--api-key-file"), "--api-key-file")
    elif "model.api_key" in flags:
        log.warning(
            "%s on the command line is visible to other users (ps); use --api-key-file, a config file or "
            "OPENAI_API_KEY",
            flags["model.api_key"][1],
        )
    resolved = resolve_config(
        file=getattr(args, "config", None), flags=flags, fixed=getattr(args, "config_fixed", None)
    )
    check_config(resolved.config)
    return resolved


def verifier_config(args: argparse.Namespace) -> VerifierConfig:
    """The VerifierConfig a command runs with (see resolved_config)."""
    return resolved_config(args).config
