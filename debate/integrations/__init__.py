"""Where users already work: Phoenix (`debate export phoenix`), inspect_ai (`debate.integrations.inspect_ai`) and
DeepEval (`debate.integrations.deepeval`). Each needs its extra (otel, inspect, deepeval); nothing here is imported
by the core."""

from __future__ import annotations

from debate.types import Report

__all__ = ["claim_lines"]


def claim_lines(report: Report) -> str:
    """Each claim's label, text and final opinion (or why it is unverifiable), one per line: a scorer's
    explanation. No square brackets: DeepEval's and inspect's consoles read them as markup."""
    lines = []
    for claim in report.claims:
        final = claim.debate.final if claim.debate is not None else None
        why = claim.reason or (final.opinion if final is not None else f"decided by {claim.decided_by}")
        lines.append(f"{claim.label or claim.status}: {claim.text} -- {why}")
    return "\n".join(lines) or (report.note or report.verdict)
