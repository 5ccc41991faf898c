"""Where users already work: Phoenix (`debate export phoenix`), inspect_ai (`debate.integrations.inspect_ai`) and
DeepEval (`debate.integrations.deepeval`). Each needs its extra (otel, inspect, deepeval); nothing here is imported
by the core."""

from __future__ import annotations

from debate.types import Report

__all__ = ["claim_lines"]


def claim_lines(report: Report) -> str:
    """Each claim's label (with its p_factual under a calibration), text and final opinion (or why it is
    unverifiable), one per line, under the line saying p_factual is not calibrated when it is not: a scorer's
    explanation. No square brackets: DeepEval's and inspect's consoles read them as markup."""
    # Here, not at the top: `debate export` is registered from this package and `debate --help` should not import
    # the orchestrator.
    from debate.pipeline import claim_explanation

    lines = [
        f"{claim.label or claim.status}{_p(claim.p_factual)}: {claim.text} -- "
        f"{claim_explanation(claim) or f'decided by {claim.decided_by}'}"
        for claim in report.claims
    ]
    if report.calibration is not None and report.calibration.warning:
        lines.insert(0, report.calibration.warning)
    return "\n".join(lines) or (report.note or report.verdict)


def _p(value: float | None) -> str:
    return "" if value is None else f" (p_factual {value:.3f})"
