"""The configuration's fields as command-line options: every leaf of VerifierConfig is a flag spelled as its field
is (`debate.min_rounds` is `--debate.min-rounds` and `[debate] min_rounds` in a config file), with its type, help
and default read from the model. (The spellings of earlier releases: debate.cli.aliases.)"""

from __future__ import annotations

import argparse
import json
import logging
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from debate.cli.conventions import shown
from debate.config import VerifierConfig

__all__ = [
    "COMMON",
    "FIELDS",
    "ConfigField",
    "FlagValue",
    "add_config_flags",
    "check_utf8",
    "from_text",
    "option_entry",
    "store_value",
]

log = logging.getLogger("debate.cli")

Kind = Literal["bool", "list", "dict", "value"]


@dataclass(frozen=True)
class ConfigField:
    """One leaf of the configuration."""

    path: str
    """Its dotted name: the flag (with `--`), the config-file key and the Python attribute path."""
    info: FieldInfo
    kind: Kind
    nullable: bool
    """None is a value it takes (written `none` where a text is read)."""
    secret: bool
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return f"--{self.path.replace('_', '-')}"

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def default(self) -> Any:
        return self.info.get_default(call_default_factory=True)

    @property
    def core(self) -> Any:
        """The field's type without its None (`int | None` -> int)."""
        annotation = self.info.annotation
        args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
        return next((a for a in args if a is not type(None)), annotation)

    @property
    def help(self) -> str:
        return " ".join((self.info.description or "").split())

    @property
    def none_is_text(self) -> bool:
        """Whether `none` in a text means None (not for a plain text field, where it may be a name)."""
        return (
            self.nullable
            and not self.secret
            and (self.kind != "value" or bool(self.choices) or not _is_text(self.info.annotation))
        )


def _is_text(annotation: Any) -> bool:
    return str in (annotation, *get_args(annotation))


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) in (dict, list):
        return None  # a model per name (roles) or a list of models (cascade teams): one option for the whole
    for arg in (annotation, *get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _leaf(path: str, info: FieldInfo) -> ConfigField:
    annotation = info.annotation
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    nullable = type(None) in args
    core = next((a for a in args if a is not type(None)), annotation)
    origin = get_origin(core)
    kind: Kind = "bool" if core is bool else "list" if origin is list else "dict" if origin is dict else "value"
    choices = tuple(str(c) for c in get_args(core)) if origin is Literal else ()
    secret = core is SecretStr
    return ConfigField(path, info, kind, nullable, secret, choices)


def _walk(model: type[BaseModel], prefix: str = "") -> Iterator[ConfigField]:
    for name, info in model.model_fields.items():
        sub = _submodel(info.annotation)
        if sub is not None:
            yield from _walk(sub, f"{prefix}{name}.")
        elif not info.exclude or SecretStr in (info.annotation, *get_args(info.annotation)):
            # Fields left out of a saved configuration (what a report shows) are not configuration: only the
            # secrets, which are never saved but are set, stay options.
            yield _leaf(f"{prefix}{name}", info)


FIELDS: dict[str, ConfigField] = {f.path: f for f in _walk(VerifierConfig)}
"""Every leaf of VerifierConfig by its dotted path."""

COMMON: dict[str, str] = {
    "model.base_url": "OpenAI-compatible endpoint (default: the embedded model)",
    "model.model": "model name (default: the endpoint's only model)",
    "debate.chain": "a chain (`debate chains`) or a chain spec file (default: true-to-skeptic)",
    "debate.min_rounds": "rounds before agreement may end the debate (default: 2)",
    "debate.max_rounds": "the most debate rounds (default: 5)",
    "debate.calibration": "a calibration file: each verdict then has its probability",
    "debate.stop": "consensus (the paper's rule); with a calibration, posterior:P, cascade:P or voi:P",
    "prefilter.prefilters": "cheap checks before the debate: none, all or NAME,NAME",
    "prompt_set": "the agents' prompts: paper, tuned, refchecker or a folder",
    "rollup": "claims -> response: any-false (the paper's), strict, major or soft",
    "roles": "a model per role, e.g. leader.model.model=gpt-4o (other fields: [model]'s)",
}
"""The options `--help` shows; `--help-all` shows every one."""

_PLUGGABLE = frozenset({"prefilter.prefilters"})
"""Common options whose brief help lists what is installed (a plugin's prefilter), not only the built-ins."""

_SECTIONS: dict[str, str] = {
    "": "general",
    "model": "model (default: the embedded SmolLM2-135M; env OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL)",
    "debate": "debate: the Markov chain",
    "claims": "claims: extraction",
    "retrieval": "retrieval: top-k sentences of a document",
    "search": "search: evidence for claims without a reference (env SERPER_API_KEY)",
    "prefilter": "prefilter: cheap checks before the debate",
    "telemetry": "telemetry: OpenTelemetry tracing",
}


def from_text(field: ConfigField, text: str) -> Any:
    """A value typed as text (a flag, an environment variable) as the field takes it: pydantic reads numbers and
    booleans from text itself; lists are comma-separated; `none` is None where None is a value."""
    # A list's `none` is the empty list (`--prefilter.prefilters none`, as the help offers), nullable or not.
    if (field.none_is_text or field.kind == "list") and text.strip().lower() in ("none", "null"):
        return [] if field.kind == "list" else None
    if field.kind == "list" and _of_models(field):
        return _json_list(text, field)
    if field.kind == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def _of_models(field: ConfigField) -> bool:
    return any(isinstance(a, type) and issubclass(a, BaseModel) for a in get_args(field.core))


def _json_list(text: str, field: ConfigField) -> Any:
    """A list of tables (cascade teams) given on the command line: as JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise argparse.ArgumentError(None, f"{field.flag}: expected a JSON list of tables, got {text[:60]!r}") from None


FlagValue = tuple[Any, str]
"""A value set on the command line, and the option string that set it."""


def store_value(namespace: argparse.Namespace, path: str, value: Any, typed: str) -> None:
    # A copy per write: the default dict is shared by every parse of this parser.
    values: dict[str, FlagValue] = dict(getattr(namespace, "config_flags", None) or {})
    values[path] = (value, typed)
    namespace.config_flags = values


class _Set(argparse.Action):
    """Records a configuration field's value as typed; the config's layers read it (debate.cli.layers)."""

    def __init__(self, *args: Any, field: ConfigField, **kwargs: Any) -> None:
        self.field = field
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        typed = option or self.field.flag
        check_utf8(self, str(values))
        if self.field.kind == "dict":
            previous = getattr(namespace, "config_flags", None) or {}
            merged = dict(previous.get(self.field.path, ({}, typed))[0])
            store_value(namespace, self.field.path, option_entry(merged, str(values), typed, self.field.path), typed)
        else:
            store_value(namespace, self.field.path, from_text(self.field, str(values)), typed)


def check_utf8(action: argparse.Action, text: str) -> None:
    bad = next((i for i, char in enumerate(text) if "\ud800" <= char <= "\udfff"), None)
    if bad is not None:
        # How a byte that is not UTF-8 reaches Python from the command line (surrogateescape).
        raise argparse.ArgumentError(action, f"the value is not valid UTF-8 (at character {bad + 1})")


_EXAMPLES = {"roles": "leader.model.model=gpt-4o-mini", "prefilter.options": "numbers.min_digits=2"}
"""What a malformed NAME.KEY=VALUE is shown, by the setting it was for."""


def _names_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def option_entry(options: dict[str, Any], given: str, flag: str, path: str = "") -> dict[str, Any]:
    """NAME.KEY=VALUE into {NAME: {KEY: VALUE}} (a dotted KEY nests: leader.model.price_in=2 is {leader: {model:
    {price_in: 2}}}), merged into `options`; VALUE is JSON when it parses, else text. `path`: the setting it is
    for (its example in the error)."""
    key, sep, raw = given.partition("=")
    parts = [part.strip() for part in key.split(".")]
    if not (sep and len(parts) >= 2 and all(parts)):
        example = _EXAMPLES.get(path)
        shown = f", e.g. {example}" if example else ""
        if path == "roles" and not sep and _names_file(given):
            # `debate tour --roles FILE` was the simulated agents' file before it became --population
            shown += "; a file of simulated agents' roles is `debate tour --population FILE`"
        raise argparse.ArgumentError(None, f"{flag} {given[:60]!r}: expected NAME.KEY=VALUE{shown}")
    try:
        value: Any = json.loads(raw)
    except (ValueError, RecursionError):
        # Not JSON (or past the parser's limits): the option's own validation sees the plain string.
        value = raw
    return _merged(options, parts, value)


def _merged(options: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    if len(path) == 1:
        return {**options, path[0]: value}
    inner = options.get(path[0])
    return {**options, path[0]: _merged(inner if isinstance(inner, dict) else {}, path[1:], value)}


class _HelpAll(argparse.Action):
    """Prints every option, the ones `--help` leaves out included, grouped by configuration section."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        parser.show_all = True
        parser.print_help()
        parser.exit()


_METAVARS = {
    "debate.calibration": "FILE",
    "debate.chain": "NAME|FILE",
    "debate.stop": "consensus|posterior:P|cascade:P|voi:P",
    "prompt_set": "NAME|DIR",
    "call_cache": "FILE",
    "retrieval.cache_dir": "DIR",
    "search.collection": "JSONL",
    "model.base_url": "URL",
    "search.base_url": "URL",
    "telemetry.endpoint": "URL",
    "rollup": "NAME",
    "team": "NAME",
    "roles": "ROLE.model.FIELD=VALUE",
    "debate.cascade": "JSON",
    "retrieval.retriever": "NAME",
    "search.backend": "NAME",
}


def _metavar(field: ConfigField) -> str:
    if field.kind == "bool":
        return "BOOL"
    if field.path in _METAVARS:
        return _METAVARS[field.path]
    if field.kind == "dict":
        return "NAME.KEY=VALUE"
    if field.choices:
        return "|".join(field.choices)
    if field.kind == "list":
        return "A,B,..."
    name = field.path.rpartition(".")[2]
    core = field.info.annotation
    if core is int or int in get_args(core):
        return "N"
    if core is float or float in get_args(core):
        return "SECONDS" if name.endswith("_s") else "X"
    return name.upper()


def _registered(path: str) -> str:
    """The names a registry-backed field takes now (built-ins and installed plugins), for its help."""
    from debate.plugins import CHAINS, PREFILTERS, RETRIEVERS, ROLLUPS, SEARCH_BACKENDS, TEAMS
    from debate.registry import Registry

    registries: dict[str, Registry[Any]] = {
        "prefilter.prefilters": PREFILTERS,
        "rollup": ROLLUPS,
        "retrieval.retriever": RETRIEVERS,
        "search.backend": SEARCH_BACKENDS,
        "debate.chain": CHAINS,
        "team": TEAMS,
    }
    registry = registries.get(path)
    return f" (registered: {', '.join(registry.names())})" if registry is not None else ""


def _help(field: ConfigField) -> str:
    if field.secret:
        return f"{field.help} Visible to other users in `ps`: prefer a config file or the environment"
    if field.info.is_required():  # a field of an optional section (search): given whenever the section is used
        return f"{field.help}{_registered(field.path)} (no default: required to use {field.section} at all)"
    default = field.default
    value = "none" if default is None else shown(default, flag=field.kind == "bool")
    return f"{field.help}{_registered(field.path)} (default: {value})"


def add_config_flags(
    parser: argparse.ArgumentParser, *, fixed: Mapping[str, Any], extra_help: Mapping[str, str] | None = None
) -> None:
    """One option per configuration field (`fixed` ones, which the command sets itself, left out), the common ones
    in `--help` and every one in `--help-all`."""
    groups: dict[str, Any] = {}
    for field in FIELDS.values():
        if field.path in fixed:
            continue
        section = field.path.partition(".")[0] if "." in field.path else ""
        if section not in groups:
            groups[section] = parser.add_argument_group(_SECTIONS.get(section, section))
        text = _help(field) + (extra_help or {}).get(field.path, "")
        action = groups[section].add_argument(
            field.flag,
            action=_Set,
            field=field,
            nargs="?" if field.kind == "bool" else None,
            const="true" if field.kind == "bool" else None,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            metavar=_metavar(field),
            help=text,
        )
        if field.path in COMMON:
            action.brief = COMMON[field.path] + (_registered(field.path) if field.path in _PLUGGABLE else "")
    parser.add_argument("--help-all", action=_HelpAll, help="show every option, grouped, with its default, and exit")
    parser.set_defaults(config_flags={})
