"""The orchestrator: a Verifier runs the registered stages over its runtime (client, caches, resources); cost before
the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from debate.pipeline._behaviour import Behaviour, assumed_behaviour, fitted_behaviour
    from debate.pipeline._estimate import Estimate, Range, estimate
    from debate.pipeline._prices import PRICE_TABLE, PRICE_TABLE_DATE, Price, cost_of, price_for
    from debate.pipeline._run import Pipeline, checked_input, claim_evaluation, claim_explanation
    from debate.pipeline._runtime import Runtime
    from debate.pipeline._team_cost import (
        ModelEstimate,
        planned_models,
        report_cost,
        role_shares,
        team_cost,
        team_prices,
    )
    from debate.pipeline._verifier import Verifier, VerifierJob, averify, run_blocking, verify

_WHERE = {
    "Behaviour": "debate.pipeline._behaviour",
    "Estimate": "debate.pipeline._estimate",
    "Range": "debate.pipeline._estimate",
    "assumed_behaviour": "debate.pipeline._behaviour",
    "estimate": "debate.pipeline._estimate",
    "fitted_behaviour": "debate.pipeline._behaviour",
    "PRICE_TABLE": "debate.pipeline._prices",
    "PRICE_TABLE_DATE": "debate.pipeline._prices",
    "Price": "debate.pipeline._prices",
    "cost_of": "debate.pipeline._prices",
    "price_for": "debate.pipeline._prices",
    "Pipeline": "debate.pipeline._run",
    "checked_input": "debate.pipeline._run",
    "claim_evaluation": "debate.pipeline._run",
    "claim_explanation": "debate.pipeline._run",
    "Runtime": "debate.pipeline._runtime",
    **dict.fromkeys(
        ["ModelEstimate", "planned_models", "report_cost", "role_shares", "team_cost", "team_prices"],
        "debate.pipeline._team_cost",
    ),
    "Verifier": "debate.pipeline._verifier",
    "VerifierJob": "debate.pipeline._verifier",
    "averify": "debate.pipeline._verifier",
    "run_blocking": "debate.pipeline._verifier",
    "verify": "debate.pipeline._verifier",
}
"""Each name's module, imported on first use (PEP 562): the cost estimate and the prices need no debate team."""


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "PRICE_TABLE",
    "PRICE_TABLE_DATE",
    "Behaviour",
    "Estimate",
    "ModelEstimate",
    "Pipeline",
    "Price",
    "Range",
    "Runtime",
    "Verifier",
    "VerifierJob",
    "assumed_behaviour",
    "averify",
    "checked_input",
    "claim_evaluation",
    "claim_explanation",
    "cost_of",
    "estimate",
    "fitted_behaviour",
    "planned_models",
    "price_for",
    "report_cost",
    "role_shares",
    "run_blocking",
    "team_cost",
    "team_prices",
    "verify",
]
