"""The option spellings of earlier releases (`--min-rounds`, `--timeout`, `--cache DIR`): each still sets its field
for one release and warns once, naming the flag that replaced it."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debate.cli.fields import FIELDS, check_utf8, from_text, option_entry, store_value
from debate.llm import CACHE_FILE

__all__ = ["ALIASES", "Alias", "add_old_spellings"]

log = logging.getLogger("debate.cli")


@dataclass(frozen=True)
class Alias:
    """An option spelling of an earlier release: it sets `paths` (through `convert`) and warns once."""

    flag: str
    paths: tuple[str, ...]
    convert: Callable[[str], Any] | None = None
    switch: bool = False
    """A flag that takes no value (it sets True)."""
    shown: str = ""
    """How the warning spells the new option, when it is not just the field's flag."""
    option: str = ""
    """For a knob that became a stage's option: NAME.KEY (the value joins `paths`' options as NAME.KEY=VALUE)."""


def _cache_file(folder: str) -> str:
    return str(Path(folder) / CACHE_FILE)


ALIASES: tuple[Alias, ...] = (
    Alias("--base-url", ("model.base_url",)),
    Alias("--model", ("model.model",)),
    Alias("--api-key", ("model.api_key",)),
    Alias("--temperature", ("model.temperature",)),
    Alias("--seed", ("model.seed",)),
    Alias("--structured-output", ("model.structured_output",)),
    Alias("--timeout", ("model.timeout_s",)),
    Alias("--concurrency", ("model.max_concurrency",)),
    Alias("--rpm", ("model.requests_per_minute",)),
    Alias("--tpm", ("model.tokens_per_minute",)),
    Alias("--price-in", ("model.price_in",)),
    Alias("--price-out", ("model.price_out",)),
    Alias("--chain", ("debate.chain",)),
    Alias("--transition", ("debate.chain",)),
    Alias("--min-rounds", ("debate.min_rounds",)),
    Alias("--max-rounds", ("debate.max_rounds",)),
    Alias("--max-parse-retries", ("debate.max_parse_retries", "claims.max_parse_retries")),
    Alias("--calibration", ("debate.calibration",)),
    Alias("--stop", ("debate.stop",)),
    Alias("--force", ("debate.force_calibration",), switch=True),
    Alias("--prior", ("debate.prior",)),
    Alias("--claim-format", ("claims.format",)),
    Alias("--max-claims", ("claims.max_claims",)),
    Alias("--retriever", ("retrieval.retriever",)),
    Alias("--top-k", ("retrieval.top_k",)),
    Alias("--retrieval-cache", ("retrieval.cache_dir",)),
    Alias("--search-backend", ("search.backend",)),
    Alias("--search-url", ("search.base_url",)),
    Alias("--search-key", ("search.api_key",)),
    Alias("--collection", ("search.collection",)),
    Alias("--results-per-query", ("search.results_per_query",)),
    Alias("--prefilter", ("prefilter.prefilters",)),
    *(
        Alias(flag, ("prefilter.options",), switch=switch, option=option, shown=f"--prefilter.options {option}=...")
        for flag, option, switch in (
            ("--trust-grounded", "logprob.trust_grounded", True),
            ("--grounded-confidence", "logprob.grounded_confidence", False),
            ("--judge-two-step", "rag-judge.two_step", True),
            ("--judge-model", "rag-judge.convert_model", False),
        )
    ),
    Alias("--prefilter-option", ("prefilter.options",)),
    Alias("--otel", ("telemetry.endpoint",)),
    Alias("--otel-project", ("telemetry.project",)),
    Alias("--prompts-dir", ("prompt_set",)),
    Alias("--cache", ("call_cache",), convert=_cache_file, shown=f"--call-cache DIR/{CACHE_FILE}"),
)
"""The spellings of release 0.x (`--min-rounds`, `--timeout`, `--cache DIR`), kept for one release."""

_WARNED: set[str] = set()


class _OldSpelling(argparse.Action):
    def __init__(self, *args: Any, alias: Alias, **kwargs: Any) -> None:
        self.alias = alias
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        check_utf8(self, str(values))
        new = self.alias.shown or " and ".join(FIELDS[p].flag for p in self.alias.paths)
        if self.alias.flag not in _WARNED:
            _WARNED.add(self.alias.flag)
            log.warning("%s is the old spelling of %s; it goes in the next release", self.alias.flag, new)
        for path in self.alias.paths:
            field = FIELDS[path]
            if field.kind == "dict":
                previous = getattr(namespace, "config_flags", None) or {}
                given = values
                if self.alias.option:
                    given = f"{self.alias.option}={'true' if self.alias.switch else values}"
                value: Any = option_entry(dict(previous.get(path, ({}, ""))[0]), str(given), self.alias.flag, path)
            elif self.alias.switch:
                value = True
            elif self.alias.convert is not None:
                value = self.alias.convert(str(values))
            else:
                value = from_text(field, str(values))
            store_value(namespace, path, value, self.alias.flag)


def add_old_spellings(parser: argparse.ArgumentParser, *, fixed: Mapping[str, Any]) -> None:
    """The old spellings as hidden-from-`--help` aliases (listed by `--help-all`), except those of fields the command
    fixes and flags the command already has (its own `--cache`)."""
    old = parser.add_argument_group("old spellings (each warns once; gone in the next release)")
    for alias in ALIASES:
        if any(path in fixed for path in alias.paths) or alias.flag in parser._option_string_actions:
            continue
        action = old.add_argument(
            alias.flag,
            action=_OldSpelling,
            alias=alias,
            nargs=0 if alias.switch else None,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=f"now {alias.shown or ' and '.join(FIELDS[p].flag for p in alias.paths)}",
        )
        action.old_spelling = True  # type: ignore[attr-defined]
