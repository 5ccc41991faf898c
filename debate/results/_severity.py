"""The paper's 0-5 error severity scale, said the same way wherever a severity is shown (CLI, desk, exports)."""

from __future__ import annotations

__all__ = ["SEVERITY", "SEVERITY_KEY", "severity_text"]

SEVERITY = ("no error", "minor", "moderate", "significant", "severe", "made up")
"""One word per level of the scale the agents are given (prompts/paper/severity_rubric.txt)."""

SEVERITY_KEY = "sev: error severity, the agents' 0-5 rating: " + ", ".join(f"{n} {w}" for n, w in enumerate(SEVERITY))
"""The key printed under a table with a severity column."""


def severity_text(severity: int | None) -> str:
    """A severity as the reader needs it: the number and what it means on the scale ("-" when there is none)."""
    if severity is None:
        return "-"
    return f"{severity}/5 ({SEVERITY[severity] if 0 <= severity < len(SEVERITY) else 'off the scale'})"
