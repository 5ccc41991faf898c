"""Which failed checks leave a calibration's p_factual uncalibrated, each said in a line."""

from __future__ import annotations

from debate.calibration._parts import Check, Labels, first

__all__ = ["UNCALIBRATING_CHECKS", "not_calibrated"]

UNCALIBRATING_CHECKS = ("markov", "state")
"""Checks whose failure leaves p_factual uncalibrated whatever the model (memory; behaviour that differs by state).
Heterogeneity and overdispersion do too when the model has one class (it assumes items alike)."""


def not_calibrated(checks: list[Check], classes: int, labels: Labels | None = None) -> list[str]:
    """The failed checks that leave p_factual uncalibrated (see `UNCALIBRATING_CHECKS`), each as a line. A check
    against the fitted model (`Check.reference`) holds its item classes, so with classes its heterogeneity check
    counts too: the mixture does not explain the items' difficulty. A fit with several classes and too few labels
    is not calibrated either: the assumption that stands in for labels is false for a class that fools the agents."""
    against = {c.name for c in checks if c.reference == "fitted model"}
    names: tuple[str, ...] = UNCALIBRATING_CHECKS
    if classes == 1:
        names = (*names, "heterogeneity", "overdispersion")
    elif "heterogeneity" in against:
        names = (*names, "heterogeneity")
    why = {
        "markov": "the agents remember earlier opinions",
        "state": "a role behaves differently by state",
        "heterogeneity": "items differ in difficulty and the model has one class"
        if classes == 1
        else f"items differ in difficulty more than the {classes} classes explain",
        "overdispersion": "items differ in difficulty and the model has one class",
    }

    def cause(check: Check) -> str:
        # pooled over classes, shared difficulty alone can fail the Markov and state checks: said, not hidden
        shared = classes > 1 and check.name in UNCALIBRATING_CHECKS and check.name not in against
        return why[check.name] + (" or items of unequal difficulty" if shared else "")

    lines = [f"the {c.name} check fails ({cause(c)}: {c.detail})" for c in checks if c.rejected and c.name in names]
    for line in (
        (labels.em_line(), labels.base_rate_line(), labels.rejection_line(), labels.unreached_line())
        if labels is not None
        else ()
    ):
        if line is not None:
            lines.append(line)
    if labels is not None and labels.orientation == "assumption" and classes > 1:
        lines.append(
            f"{classes} classes of items and {labels.labelled} labelled claims: which verdicts are right in each "
            f"class is not known (label {labels.needed} more claims: {first(labels.to_label)})"
        )
    return lines
