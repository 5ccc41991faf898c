"""What a results record was made with, for resuming: the task, the model, the prompts and the configuration fields
that can change a verdict. A batch resumed with other settings would mix two configurations in one output."""

from __future__ import annotations

import json
from typing import Any

from debate.provenance import depended_files
from debate.types import RunMeta

__all__ = ["comparable", "differences", "same_setting", "setting_of", "shown_differences", "startless_differences"]

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
    `differences`)."""
    config = json.loads(json.dumps(meta.config))
    for path in _NO_EFFECT:
        holder = config
        for name in path[:-1]:
            holder = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(path[-1], None)
    _later_fields_at_default(config)
    setting: dict[str, Any] = {"task": task, "model": meta.model, "prompts": meta.prompts, "config": config}
    if meta.roles:
        setting["roles"] = dict(meta.roles)  # each role's model as its endpoint named it
    if meta.files:
        setting["files"] = meta.files
    return setting


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


def comparable(recorded: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """`current` as `recorded` can be compared with: without the files' digests when the record has none (made by
    a release that did not keep them: a log it made still resumes)."""
    if "files" in recorded:
        return current
    return {k: v for k, v in current.items() if k != "files"}


def same_setting(recorded: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a record made with `recorded` was made with the settings `current` (see `comparable`)."""
    return recorded == comparable(recorded, current)


def shown_differences(found: list[str], most: int = 4) -> str:
    """The first differences, in a line; a file's changed content named as such."""
    shown = [_file_change(line) for line in found[:most]]
    return "; ".join(shown) + (f"; and {len(found) - most} more" if len(found) > most else "")


def _file_change(line: str) -> str:
    if not line.startswith("files."):
        return line
    name, _, change = line.removeprefix("files.").partition(": ")
    old, _, new = change.partition(" -> ")
    return f"the file of {name} changed (sha256 {old.strip(chr(34))[:12]} -> {new.strip(chr(34))[:12]})"


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each leaf that differs, as `dotted.path: old -> new` (JSON values), in key order."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted({*old, *new}):
            found += differences(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))
        return found
    return [] if old == new else [f"{where}: {json.dumps(old)} -> {json.dumps(new)}"]


def startless_differences(setting: dict[str, Any], task: str, config: dict[str, Any]) -> list[str]:
    """How a finished record's `setting` differs from a run of `task` under `config` (VerifierConfig as JSON),
    judged without starting the model: the task, the configuration less its model section (resolved only when the
    endpoint answers), and the model's name where `config` names one. What a batch with nothing left to run can
    still check before it says "already done"."""
    recorded = {k: v for k, v in setting.get("config", {}).items() if k != "model"}
    current = {k: v for k, v in json.loads(json.dumps(config)).items() if k != "model"}
    _later_fields_at_default(current)
    for path in _NO_EFFECT:
        if len(path) == 1:
            recorded.pop(path[0], None)
            current.pop(path[0], None)
    found = differences({"task": setting.get("task"), "config": recorded}, {"task": task, "config": current})
    if setting.get("files"):
        # files recorded by an older release are not compared (they were not kept)
        found += differences({"files": setting["files"]}, {"files": depended_files(config)})
    # The model as the configuration named it (the endpoint may answer under another name: an alias, a dated
    # version), compared only when this run names one.
    named = (config.get("model") or {}).get("model")
    recorded_model = (setting.get("config", {}).get("model") or {}).get("model")
    if named and recorded_model and named != recorded_model:
        found.append(f"model: {json.dumps(recorded_model)} -> {json.dumps(named)}")
    return found
