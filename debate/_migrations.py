"""Configurations saved by earlier releases, brought to today's layout before validation, so a run folder's
config.json, a saved config file and a resumed run keep loading after a field is renamed or replaced."""

from __future__ import annotations

from typing import Any

__all__ = ["upgrade_prefilter", "upgrade_verifier"]

_MODE_PREFILTERS: dict[str, list[str]] = {
    "none": [],
    "rules": ["rules"],
    "logprob": ["logprob"],
    "all": ["rules", "logprob"],
}
"""0.1's `prefilter.mode`: which of the two built-in prefilters ran."""


def upgrade_prefilter(data: Any) -> Any:
    """`mode` (0.1) became the `prefilters` list; `judge_always = true` became `judge_on = "always"`."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    mode = data.get("mode")
    if isinstance(mode, str) and mode in _MODE_PREFILTERS:
        del data["mode"]
        data.setdefault("prefilters", list(_MODE_PREFILTERS[mode]))
    if "judge_always" in data and data.pop("judge_always"):
        data.setdefault("judge_on", "always")
    return data


def upgrade_verifier(data: Any) -> Any:
    """`concurrency` (0.1, items or claims at once) became `claim_concurrency` (the model's own limit is
    model.max_concurrency)."""
    if (
        isinstance(data, dict)
        and isinstance(data.get("concurrency"), int)
        and not isinstance(data["concurrency"], bool)
    ):
        data = dict(data)
        data.setdefault("claim_concurrency", data.pop("concurrency"))
    return data
