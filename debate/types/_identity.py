"""A model's identity: what its answers depend on."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["SAMPLING_FIELDS", "ModelIdentity", "StructuredOutputMode", "name_of_label"]

StructuredOutputMode = Literal["auto", "json_schema", "json_object", "none"]

SAMPLING_FIELDS = ("temperature", "max_tokens", "seed", "structured_output", "max_string_chars")
"""The settings of a model that change its answers (with its endpoint and name, its identity)."""


class ModelIdentity(BaseModel):
    """A model as its answers depend on it, made once from its configuration: where it is served, its name and the
    settings that change its answers. Routing, labels, prices, calibration checks, resume and reports read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None
    """Its base_url (None: the embedded model)."""
    name: str | None
    """The model name sent (as the endpoint resolved it, where it was asked)."""
    temperature: float = 0.0
    """Sampling temperature."""
    max_tokens: int = 512
    """Completion token limit per call."""
    seed: int | None = 0
    """Seed sent to the endpoint."""
    structured_output: StructuredOutputMode = "auto"
    """How replies are constrained to the schema."""
    max_string_chars: int | None = None
    """The bound on a structured reply's strings."""

    def sampling(self) -> dict[str, Any]:
        """The settings that change its answers, by field."""
        return {name: getattr(self, name) for name in SAMPLING_FIELDS}

    def sampling_differences(self, other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Each sampling setting that differs from `other`'s (a recorded one; a field it lacks is not compared):
        (`other`'s value, this one's)."""
        return {
            name: (other[name], value)
            for name, value in self.sampling().items()
            if name in other and other[name] != value
        }

    def differences_said(self, other: dict[str, Any]) -> str:
        """`sampling_differences` in words: `temperature 0.0 (now 0.7), seed 0 (now 1)`."""
        return ", ".join(
            f"{name} {was!r} (now {now!r})" for name, (was, now) in self.sampling_differences(other).items()
        )


def name_of_label(label: str) -> str:
    """The model name a run's label for it was made from (debate.endpoints.unique_label adds `@host`,
    `[setting=value]` or `#n` to a name another of the run's models has)."""
    return re.split(r"[@\[#]", label, maxsplit=1)[0] or label
