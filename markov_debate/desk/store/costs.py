"""What a finished audit cost: its report's usage per model, each model at its own price, by the command line's
computation (debate.pipeline.report_cost), the desk's --price-prompt / --price-completion being its `[model]`'s."""

from __future__ import annotations

from pydantic import ValidationError

from debate.config import VerifierConfig
from debate.pipeline import report_cost
from debate.types import Report

__all__ = ["audit_cost"]


def audit_cost(report: Report, prices: tuple[float, float]) -> float | None:
    """The audit's cost (None: the desk tracks no cost, or a model of its team has no price of its own).

    The report's own configuration says which model each turn ran on (a per-audit override's team included); a role
    on `[model]`'s model takes the desk's price, a role on another model its own given price or the price table's.
    """
    if not any(prices):
        return None
    try:
        config = VerifierConfig.model_validate(report.meta.config)
    except ValidationError:
        return None  # a report made by another release whose configuration does not read: priced as before
    model = config.model.model_copy(update={"price_in": prices[0], "price_out": prices[1]})
    return report_cost(report, config.model_copy(update={"model": model}))
