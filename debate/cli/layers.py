"""The configuration as layers: the models' defaults, then a config file (`--config FILE`), then the environment,
then the command line (and what a command fixes itself). Each value remembers the layer it came from, for
`debate config show` and for errors, which name the flag, the file's key or the variable the user set."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from debate.cli.fields import FIELDS, ConfigField, FlagValue, from_text
from debate.config import VerifierConfig
from debate.errors import InputError, UsageError
from debate.files import read_text_file

__all__ = [
    "ENVIRONMENT",
    "Layer",
    "ResolvedConfig",
    "config_digest",
    "config_toml",
    "deep_merge",
    "load_config_file",
    "resolve_config",
]

ENVIRONMENT: dict[str, str] = {
    "OPENAI_BASE_URL": "model.base_url",
    "DEBATE_MODEL": "model.model",
    "OPENAI_API_KEY": "model.api_key",
    "SERPER_API_KEY": "search.api_key",
}
"""The variables the configuration reads, and the field each sets."""

Values = dict[str, Any]
"""Values by dotted path: a field's path, or (for a key no field has) the key as written."""


@dataclass(frozen=True)
class Layer:
    """Values from one place, each with how the user would name where it was set."""

    name: str
    """default, file, environment, flag or command."""
    values: Values
    where: dict[str, str]
    """For each path, the flag, file key or variable that set it."""


@dataclass(frozen=True)
class ResolvedConfig:
    """The configuration, and for each field the layer its value came from."""

    config: VerifierConfig
    sources: dict[str, str]
    """Field path -> `default`, `file PATH`, `environment NAME`, `flag --x` or `command`."""


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Values:
    """A nested mapping as dotted paths down to the fields (a table a field takes whole, e.g. prefilter.options,
    stays one value; a key no field has stays as written, so validation names it)."""
    flat: Values = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in FIELDS and any(f.startswith(f"{path}.") for f in FIELDS):
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _nest(flat: Values) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


_SECTIONS = frozenset(p.split(".")[0] for p in FIELDS)
"""The configuration's top-level names: a field (`rollup`) or a section (`debate`)."""


def load_config_file(path: Path) -> Layer:
    """A config file's values: TOML (`[debate] min_rounds = 3`), or JSON (a saved VerifierConfig, e.g. a run's
    `config.json` "verifier" or `debate config show --format json`).

    Raises:
        UsageError: the file cannot be read or parsed (its line named), or holds something other than a table.
    """
    text = _read_config_text(path)
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise UsageError(f"--config {path}: not valid {kind}: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a table of settings, got {type(data).__name__}")
    spec = data.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("verifier"), dict):
        data = spec["verifier"]  # a run folder's config.json: the configuration it ran with (beside it, its record)
    elif isinstance(data.get("verifier"), dict):
        # a run's spec, saved alone; settings beside it would be dropped without a word: a file is one or the other
        beside = sorted(k for k in data if k != "verifier" and k.split(".")[0] in _SECTIONS)
        data = data["verifier"]
        if beside:
            raise UsageError(
                f"--config {path}: holds a run's configuration (its `verifier` table) and settings beside it "
                f"({', '.join(_shown(k) for k in beside[:4])}); put every setting in one place"
            )
    values = {path_: _file_value(path_, value, path) for path_, value in _flatten(data).items()}
    return Layer("file", values, {p: f"{path}: {_shown(p)}" for p in values})


def _read_config_text(path: Path) -> str:
    try:
        return read_text_file(path, "--config")
    except InputError as exc:  # it names the file and what is wrong with it
        raise UsageError(str(exc)) from None


def _file_value(path: str, value: Any, file: Path) -> Any:
    field = FIELDS.get(path)
    if field is None:
        return value
    _strict(field, value, file)
    if isinstance(value, str) and (field.kind == "list" or field.none_is_text):
        return from_text(field, value)
    return value


def _strict(field: ConfigField, value: Any, file: Path) -> None:
    """A config file's values are typed (TOML, JSON): a boolean where a number goes (`min_rounds = true` ran 1
    round) or text where a boolean goes (`localize = "yes"`) is refused naming the key, as the command line would
    refuse it, not converted."""
    core = field.core
    wanted = (
        "true or false"
        if core is bool and not isinstance(value, bool)
        else "a number"
        if core in (int, float) and (isinstance(value, bool) or not isinstance(value, int | float))
        else None
    )
    # TOML has no null: a saved configuration writes an unset number as "none" (config_toml), read back as None
    unset = value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null"))
    if wanted is not None and not (unset and field.nullable):
        raise UsageError(f"--config {file}: {field.path} = {json.dumps(value)[:60]}: expected {wanted}")


def _environment(environ: Mapping[str, str]) -> Layer:
    values: Values = {}
    where: dict[str, str] = {}
    for name, path in ENVIRONMENT.items():
        if environ.get(name):
            values[path], where[path] = environ[name], name
    return Layer("environment", values, where)


def _flags(flags: Mapping[str, FlagValue]) -> Layer:
    return Layer("flag", {p: v for p, (v, _) in flags.items()}, {p: typed for p, (_, typed) in flags.items()})


def resolve_config(
    *,
    file: Path | None = None,
    flags: Mapping[str, FlagValue] | None = None,
    fixed: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """The configuration from its layers, later ones winning: defaults, file, environment, flags, what the command
    fixes.

    Raises:
        UsageError: a value no field takes, named by where it was set (`--debate.min-rounds: ...`,
            `cfg.toml: debate.min_rounds: ...`, `OPENAI_BASE_URL: ...`).
    """
    layers = [
        *([load_config_file(file)] if file is not None else []),
        _environment(os.environ if environ is None else environ),
        _flags(flags or {}),
        Layer("command", dict(fixed or {}), {p: "the command" for p in fixed or {}}),
    ]
    merged: Values = {}
    where: dict[str, str] = {}
    sources: dict[str, str] = {}
    searched = any(p.startswith("search.") for layer in layers if layer.name != "environment" for p in layer.values)
    for layer in layers:
        for path, value in layer.values.items():
            if layer.name == "environment" and path.startswith("search.") and not searched:
                continue  # a search key in the environment does not turn search on
            earlier = merged.get(path)
            if isinstance(earlier, dict) and isinstance(value, dict) and path in FIELDS:
                # A table of options by name (roles, task_options): a later layer adds to it, key by key.
                value = deep_merge(earlier, value)
            merged[path], where[path] = value, layer.where[path]
            sources[path] = {
                "file": f"file {file}",
                "environment": f"environment {layer.where.get(path)}",
                "flag": f"flag {layer.where.get(path)}",
            }.get(layer.name, layer.name)
    tables = {path.rsplit(".", depth)[0] for path in merged for depth in range(1, path.count(".") + 1)}
    for path in merged:
        if path in tables:
            # `debate = 5` in a file and a debate.* value anywhere: a section given as a value is named, never
            # silently replaced by the table the other value needs.
            raise UsageError(f"{where[path]}: {_shown(path)} is a table of settings, not a value")
    if merged.get("prefilter.prefilters") == ["all"]:
        merged["prefilter.prefilters"] = _every_prefilter()
    try:
        config = VerifierConfig.model_validate(_nest(merged))
    except ValidationError as exc:
        raise _problem(exc, where) from None
    return ResolvedConfig(config, {p: sources.get(p, "default") for p in FIELDS})


def deep_merge(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """`earlier` with `later`'s values in place, table by table (a table in both is merged, not replaced)."""
    merged = dict(earlier)
    for key, value in later.items():
        before = merged.get(key)
        merged[key] = deep_merge(before, value) if isinstance(before, dict) and isinstance(value, dict) else value
    return merged


def _every_prefilter() -> list[str]:
    """`all`: the built-ins in the order the RAG rules suggest (rules first), then every installed one."""
    from debate.plugins import PREFILTERS

    builtin = ["rules", "logprob"]
    return builtin + [name for name in PREFILTERS.names() if name not in builtin]


def _problem(exc: ValidationError, where: Mapping[str, str]) -> UsageError:
    """The first problem, named by where the user set the value (the flag, the file's key, the variable)."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    message = " ".join(str(first["msg"]).split())
    message = message.removeprefix("Value error, ")
    if loc in where:
        return UsageError(f"{where[loc]}: {message}")
    table = next((p for p in where if loc.startswith(f"{p}.") and FIELDS.get(p, None) is not None), None)
    if table is not None:
        # Inside a table of options by name (roles.leader.model.temperature): the entry, and who set the table.
        return UsageError(f"{where[table]}: {_shown(loc)}: {message}")
    section = loc.rpartition(".")[0]
    if first["type"] == "missing" and section:
        # search.timeout_s alone turns search on, and search then needs its backend: say which settings did that
        places = sorted({where[p] for p in where if p.startswith(f"{section}.")})
        setby = f" (set by {', '.join(places[:4])})" if places else ""
        return UsageError(f"configuration {_shown(loc)}: needed once any {section}.* setting is given{setby}")
    # A check across fields (min_rounds against max_rounds): name where the section's values were set.
    places = sorted({where[p] for p in where if p.startswith(f"{loc}.") or not loc})
    setby = f" (set by {', '.join(places[:4])})" if places else ""
    return UsageError(f"configuration{f' {_shown(loc)}' if loc else ''}: {message}{setby}")


def _shown(key: str) -> str:
    """A key as an error names it: quoted when it holds a line break or another unprintable character, so the
    error stays one line."""
    return key if key.isprintable() else repr(key)


def _none_written(config: VerifierConfig) -> Values:
    """None where the default is not None (a seed of None) is written `none`: TOML has no null."""
    values: Values = {}
    for path, field in FIELDS.items():
        if field.secret or not field.nullable or field.default is None:
            continue
        node: Any = config
        for part in path.split("."):
            node = getattr(node, part, None) if node is not None else None
        if node is None and _section_set(config, path):
            values[path] = "none"
    return values


def _section_set(config: VerifierConfig, path: str) -> bool:
    section = path.partition(".")[0]
    return "." not in path or getattr(config, section, None) is not None


def config_data(config: VerifierConfig) -> dict[str, Any]:
    """The configuration as a config file holds it: secrets left out, None written `none` where it is not the
    default."""
    flat = _flatten(config.model_dump(mode="json", exclude_none=True))
    flat.update(_none_written(config))
    return _nest(flat)


def config_toml(config: VerifierConfig) -> str:
    """The configuration as a TOML config file that `--config` reads back to the same configuration."""
    return tomli_w.dumps(config_data(config))


def config_digest(config: VerifierConfig) -> str:
    """A sha256 of what the configuration decides (its secrets never part of it)."""
    return hashlib.sha256(json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
