"""The orchestrator: a Verifier runs the registered stages over its runtime (client, caches, resources); cost before
the run.
"""

from debate.pipeline._estimate import Behaviour, Estimate, Range, assumed_behaviour, estimate, fitted_behaviour
from debate.pipeline._prices import PRICE_TABLE, PRICE_TABLE_DATE, Price, cost_of, price_for
from debate.pipeline._run import Pipeline, claim_evaluation, claim_explanation
from debate.pipeline._runtime import Runtime
from debate.pipeline._verifier import Verifier, VerifierJob, averify, run_blocking, verify

__all__ = [
    "PRICE_TABLE",
    "PRICE_TABLE_DATE",
    "Behaviour",
    "Estimate",
    "Pipeline",
    "Price",
    "Range",
    "Runtime",
    "Verifier",
    "VerifierJob",
    "assumed_behaviour",
    "averify",
    "claim_evaluation",
    "claim_explanation",
    "cost_of",
    "estimate",
    "fitted_behaviour",
    "price_for",
    "run_blocking",
    "verify",
]
