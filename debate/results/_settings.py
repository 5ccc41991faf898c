"""What a results record was made with, for resuming: the task, the model, the prompts and the configuration fields
that can change a verdict. A batch resumed with other settings would mix two configurations in one output."""

from __future__ import annotations

import json
from typing import Any

from debate.types import RunMeta

__all__ = ["differences", "setting_of"]

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
    return {"task": task, "model": meta.model, "prompts": meta.prompts, "config": config}


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each leaf that differs, as `dotted.path: old -> new` (JSON values), in key order."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted({*old, *new}):
            found += differences(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))
        return found
    return [] if old == new else [f"{where}: {json.dumps(old)} -> {json.dumps(new)}"]
