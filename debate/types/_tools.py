"""The tool-call checks' outputs: a finding on a call, the call itself, and what self-correction did."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CorrectionResult", "FindingKind", "ToolCall", "ToolCallFinding"]


FindingKind = Literal["tool_name", "parameter", "fact"]


class ToolCallFinding(BaseModel):
    """One problem with a tool call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FindingKind
    """tool_name, parameter or fact."""
    confidence: float = Field(ge=0, le=1)
    """How sure the check is that the call is wrong."""
    evidence: str
    """What was found."""
    correction: str
    """What the agent should do instead."""


class ToolCall(BaseModel):
    """A tool call as an agent made it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The tool's name."""
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """Its arguments: an object, or the raw JSON text the agent sent."""


class CorrectionResult(BaseModel):
    """What the self-correction did with one tool call (the tool-call checks' SelfCorrectionHandler's result, plus "
    "the recheck)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    corrected: ToolCall | None
    """The first call that passed every check (the original itself when it passed); None when the attempts ran
    out or the model could not be reached."""
    original: ToolCall
    """The call as the agent first made it."""
    suggestion: str | None
    """The model's last reply to a correction, as the seed returns it (None when no correction was sent)."""
    feedback: str
    """The last correction message sent to the agent (the checks' verdict when nothing needed correcting)."""
    attempts: int = Field(ge=0)
    """Corrections sent to the agent's model."""
    findings: list[ToolCallFinding]
    """The findings on the last call checked (empty when corrected)."""
    error: str | None = None
    """Why the model could not be asked (the seed's `error`): an endpoint failure, not the agent's mistake."""
