"""Where users already work: Phoenix (`debate export phoenix`), inspect_ai (`debate.integrations.inspect_ai`) and
DeepEval (`debate.integrations.deepeval`). Each needs its extra (otel, inspect, deepeval); nothing here is imported
by the core."""

from __future__ import annotations

from debate.types import Report

__all__ = ["claim_lines"]


def claim_lines(report: Report) -> str:
    """Each claim's label, text and final opinion (or why it is unverifiable), one per line: a scorer's
    explanation. No square brackets: DeepEval's and inspect's consoles read them as markup."""
    # Here, not at the top: `debate export` is registered from this package and `debate --help` should not import
    # the orchestrator.
    from debate.pipeline import claim_explanation

    lines = [
        f"{claim.label or claim.status}: {claim.text} -- {claim_explanation(claim) or f'decided by {claim.decided_by}'}"
        for claim in report.claims
    ]
    return "\n".join(lines) or (report.note or report.verdict)
