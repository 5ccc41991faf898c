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


_PREFILTER_KNOBS: dict[str, tuple[str, str, object]] = {
    "invalid_citation_decides": ("rules", "invalid_citation_decides", False),
    "trust_grounded": ("logprob", "trust_grounded", False),
    "grounded_confidence": ("logprob", "grounded_confidence", 0.8),
    "max_claims": ("logprob", "max_claims", 10),
    "min_chars": ("logprob", "min_chars", 15),
    "target": ("logprob", "target", 0.95),
    "budget": ("logprob", "budget", "seed"),
    "budget_unit": ("logprob", "budget_unit", "nats"),
    "top_logprobs": ("logprob", "top_logprobs", 10),
    "judge_two_step": ("rag-judge", "two_step", False),
    "judge_model": ("rag-judge", "convert_model", None),
    "judge_on": ("rag-judge", "when", "flow"),
}
"""0.2's flat knobs of the built-in prefilters -> (prefilter, its option, 0.2's default): they are each prefilter's
options now, set the way a plugin's are. Every saved 0.2 configuration wrote all of them: a knob at 0.2's default is
dropped, so a saved run's settings read as a new run's with the same settings (and resume it)."""
_CITATION_VARIANT_MOVED = "prefilter.citation_variant is now task_options.rag.citation_variant (the rag task's option)"


def upgrade_prefilter(data: Any) -> Any:
    """`mode` (0.1) became the `prefilters` list; `judge_always = true` became `judge_on = "always"`; the built-in
    prefilters' flat knobs (0.2) became their options (`options.<prefilter>.<option>`), kept only for a listed
    prefilter (for another one they never had an effect)."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    mode = data.get("mode")
    if isinstance(mode, str) and mode in _MODE_PREFILTERS:
        del data["mode"]
        data.setdefault("prefilters", list(_MODE_PREFILTERS[mode]))
    if "judge_always" in data and data.pop("judge_always"):
        data.setdefault("judge_on", "always")
    if "citation_variant" in data:
        # Only a whole VerifierConfig can move it (upgrade_verifier does, before this runs).
        raise ValueError(_CITATION_VARIANT_MOVED)
    knobs = {key: data.pop(key) for key in list(data) if key in _PREFILTER_KNOBS}
    if knobs:
        listed = data.get("prefilters")
        options = data.get("options")
        options = dict(options) if isinstance(options, dict) else {}
        for key, value in knobs.items():
            name, option, default = _PREFILTER_KNOBS[key]
            if isinstance(listed, list) and name in listed and not (value == default and type(value) is type(default)):
                entry = options.get(name)
                entry = dict(entry) if isinstance(entry, dict) else {}
                entry.setdefault(option, value)
                options[name] = entry
        data["options"] = options
    return data


def upgrade_verifier(data: Any) -> Any:
    """`concurrency` (0.1, items or claims at once) became `claim_concurrency` (the model's own limit is
    model.max_concurrency); `prefilter.citation_variant` (0.2) became the rag task's option and `soft_threshold`
    (0.2) the soft rollup's."""
    if not isinstance(data, dict):
        return data
    if isinstance(data.get("concurrency"), int) and not isinstance(data["concurrency"], bool):
        data = dict(data)
        data.setdefault("claim_concurrency", data.pop("concurrency"))
    if "soft_threshold" in data:
        data = dict(data)
        threshold = data.pop("soft_threshold")
        if threshold != 0.5:  # the default: nothing to carry
            rollups = data.get("rollup_options")
            rollups = dict(rollups) if isinstance(rollups, dict) else {}
            soft = rollups.get("soft")
            rollups["soft"] = {"threshold": threshold, **(soft if isinstance(soft, dict) else {})}
            data["rollup_options"] = rollups
    prefilter = data.get("prefilter")
    if isinstance(prefilter, dict) and "citation_variant" in prefilter:
        data, prefilter = dict(data), dict(prefilter)
        variant = prefilter.pop("citation_variant")
        data["prefilter"] = prefilter
        tasks = data.get("task_options")
        tasks = dict(tasks) if isinstance(tasks, dict) else {}
        rag = tasks.get("rag")
        rag = dict(rag) if isinstance(rag, dict) else {}
        if variant != "seed":  # the default: nothing to carry
            rag.setdefault("citation_variant", variant)
            tasks["rag"] = rag
        if tasks or "task_options" in data:
            data["task_options"] = tasks
    return data
