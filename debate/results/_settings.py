"""What a results record was made with, for resuming: the task, the model, the prompts and the configuration fields
that can change a verdict. A batch resumed with other settings would mix two configurations in one output."""

from __future__ import annotations

import json
from typing import Any

from debate.provenance import depended_files
from debate.types import RunMeta

__all__ = [
    "differences",
    "same_setting",
    "setting_differences",
    "setting_of",
    "shown_differences",
    "startless_setting",
]

_NO_EFFECT: tuple[tuple[str, ...], ...] = (
    ("claim_concurrency",),
    ("telemetry",),
    ("call_cache",),
    ("model", "base_url"),
    ("model", "max_concurrency"),
    ("model", "requests_per_minute"),
    ("model", "tokens_per_minute"),
    ("model", "price_in"),
    ("model", "price_out"),
    ("model", "timeout_s"),
    ("model", "max_attempts"),
    ("model", "backoff_initial_s"),
    ("model", "backoff_max_s"),
)
"""Fields that change how fast or where a run goes, never what it finds (a resumed run may change them)."""

_LATER: dict[tuple[str, ...], Any] = {("debate", "force_calibration_team"): False, ("debate", "cascade"): []}
"""Fields added after logs were written, at their default: left out of a setting, so such a log still resumes."""


def setting_of(task: str, meta: RunMeta) -> dict[str, Any]:
    """The settings a report of `task` with this `meta` was made with, as a JSON-able dict (compare two with
    `setting_differences`)."""
    setting: dict[str, Any] = {
        "task": task,
        "model": meta.model,
        "prompts": meta.prompts,
        "config": _effective(meta.config),
    }
    if meta.embedded:
        setting["embedded"] = True  # its model section is the embedded model's (embedded_model_config)
    if meta.roles:
        setting["roles"] = dict(meta.roles)  # each role's model as its endpoint named it
    if meta.files:
        setting["files"] = meta.files
    return setting


def startless_setting(task: str, config: dict[str, Any]) -> dict[str, Any]:
    """What can be known of a run of `task` under `config` (VerifierConfig as JSON) without starting its model: the
    configuration, whether it names no endpoint (the embedded model, once started), and the digests of the files it
    reads. What a batch with nothing left to run compares before it says "already done"."""
    setting: dict[str, Any] = {"task": task, "config": _effective(config)}
    if (config.get("model") or {}).get("base_url") is None:
        setting["embedded"] = True
    files = depended_files(config)
    if files:
        setting["files"] = files
    return setting


def _as_embedded(config: dict[str, Any]) -> None:
    """`config`'s (as `_effective` left it) model section as the embedded model runs it, in place."""
    from debate.config import ModelConfig
    from debate.llm import embedded_model_config

    model = embedded_model_config(ModelConfig.model_validate(config.get("model") or {}), "")
    config["model"] = _effective({"model": model.model_dump(mode="json")})["model"]


def _effective(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (as JSON) less what changes no verdict (_NO_EFFECT) and the fields later releases added, at their
    default (_LATER)."""
    config = json.loads(json.dumps(config))
    for path in _NO_EFFECT:
        holder: Any = config
        for name in path[:-1]:
            holder = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(path[-1], None)
    _later_fields_at_default(config)
    return config


def _later_fields_at_default(config: dict[str, Any]) -> None:
    """Leave out of `config` (in place) what a log written before a field existed could not hold: the fields of
    _LATER at their default, and a team with no model per role."""
    for path, default in _LATER.items():
        holder: Any = config
        for name in path[:-1]:
            holder = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and holder.get(path[-1], default) == default:
            holder.pop(path[-1], None)
    for role, given in list((config.get("roles") or {}).items()):
        # A role's model is one more model section: the same fields change nothing it finds.
        for path in _NO_EFFECT:
            if path[0] == "model" and isinstance(given.get("model"), dict):
                given["model"].pop(path[1], None)
        if not given.get("model"):
            del config["roles"][role]
    if not config.get("roles"):
        config.pop("roles", None)


def setting_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """How a record made with `recorded` differs from a run with `current` (both `setting_of`, or `current` a
    `startless_setting`): each setting or file that differs, `dotted.path: old -> new`. The one comparison a resume
    makes, whether or not its model is started. A file both sides digested is compared by its content, not its path
    (the same bytes at a new path are the same setting); one the record did not digest (an older release) by path;
    what a start resolves (the model's answered name, prompt hashes, each role's model) only where `current` has it,
    and the model's name only where the configuration gives one."""
    old, new = json.loads(json.dumps(recorded)), json.loads(json.dumps(current))
    if "model" not in new and new.get("embedded") and old.get("embedded"):
        _as_embedded(new["config"])  # a run of the embedded model, resumed without starting it
    old.pop("embedded", None)
    new.pop("embedded", None)
    for key in ("model", "prompts", "roles"):
        if key not in new:
            old.pop(key, None)
    if (new.get("config", {}).get("model") or {}).get("model") is None:
        for side in (old, new):
            (side.get("config", {}).get("model") or {}).pop("model", None)
    old_files, new_files = old.pop("files", None) or {}, new.pop("files", None) or {}
    for key in [k for k in new_files if k not in old_files]:
        del new_files[key]  # a record made before this file was digested: its path decides
    for key in [k for k in new_files if k in old_files]:
        if _by_digest(old.get("config"), key, old_files[key]) and _by_digest(new.get("config"), key, new_files[key]):
            del old_files[key], new_files[key]
    if old_files or new_files:
        old["files"], new["files"] = old_files, new_files
    return differences(old, new)


def same_setting(recorded: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a record made with `recorded` was made with the settings `current` (see `setting_differences`)."""
    return not setting_differences(recorded, current)


def _by_digest(config: Any, key: str, digest: str) -> bool:
    """Put `sha256:<digest>` in place of the path at `key` (a depended file's dotted setting) in `config`; whether
    the key names a setting there (a chain's prompt file has none: it stays under `files`)."""
    *path, last = key.split(".")
    holder = config
    for name in path:
        if isinstance(holder, list) and name.isdigit() and int(name) < len(holder):
            holder = holder[int(name)]
        elif isinstance(holder, dict):
            holder = holder.get(name)
        else:
            return False
    if not isinstance(holder, dict) or not isinstance(holder.get(last), str):
        return False
    holder[last] = f"sha256:{digest}"
    return True


def shown_differences(found: list[str], most: int = 4) -> str:
    """The first differences, in a line; a file's changed content named as such."""
    shown = [_file_change(line) for line in found[:most]]
    return "; ".join(shown) + (f"; and {len(found) - most} more" if len(found) > most else "")


def _file_change(line: str) -> str:
    """A file's changed content said as such (`files.K: "a" -> "b"`, or a setting both sides name by digest)."""
    name, _, change = line.partition(": ")
    old, _, new = change.partition(" -> ")
    digests = old.startswith('"sha256:') and new.startswith('"sha256:')
    if not (name.startswith("files.") or digests):
        return line

    def shown(value: str) -> str:
        value = value.strip('"').removeprefix("sha256:")
        return value[:12] if value and value != "null" else "none"

    name = name.removeprefix("files.").removeprefix("config.")
    return f"the file of {name} changed (sha256 {shown(old)} -> {shown(new)})"


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each leaf that differs, as `dotted.path: old -> new` (JSON values), in key order."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted({*old, *new}):
            found += differences(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))
        return found
    return [] if old == new else [f"{where}: {json.dumps(old)} -> {json.dumps(new)}"]
