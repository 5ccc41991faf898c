"""EM to convergence: an absolute stop on the gain of the log-likelihood (scaled by the number of claims), a cap that
is reported when it is hit, and SQUAREM acceleration (Varadhan and Roland 2008, scheme S3, with the monotone
fall-back to two plain EM steps).

Plain EM on the latent fit moves slowly where the turns say little about the share of factual claims: on exact data
of the lenient population it took 1,240 iterations to converge, and a relative stop of 1e-7 of the log-likelihood
ended it after 122 at a share of 0.534 instead of 0.500. The only packaged SQUAREM found is for JAX; this is the
few lines it takes on numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from experiments.dynamics.model import Floats

__all__ = ["MAX_EVALUATIONS", "TOLERANCE", "Converged", "run_em"]

TOLERANCE = 1e-10
"""The stop, with `STEP`: a plain EM step gains less than this times the number of claims in log-likelihood."""
STEP = 1e-9
"""... and moves no parameter (on its own scale: a rate, a weight) by more than this. The gain alone is not enough
where the likelihood is flat: a share of factual claims the turns barely tell moves by 1e-4 for a gain of 1e-7."""
MAX_EVALUATIONS = 20_000
"""EM steps at most; a fit that reaches it says it did not converge."""


@dataclass(frozen=True)
class Converged:
    """Where EM ended."""

    point: Floats
    """The parameters (in the caller's unconstrained coordinates)."""
    loglik: float
    """The log-likelihood at `point`."""
    steps: int
    """EM steps taken (the map evaluated)."""
    converged: bool
    """False: `MAX_EVALUATIONS` was reached first."""


Step = Callable[[Floats], tuple[Floats, float]]
"""One EM step in unconstrained coordinates: x -> (the next x, the log-likelihood at x)."""


def run_em(
    step: Step,
    start: Floats,
    claims: float,
    *,
    natural: Callable[[Floats], Floats] | None = None,
    accelerate: bool = True,
    cap: int = MAX_EVALUATIONS,
) -> Converged:
    """EM from `start` until a plain step gains less than `TOLERANCE` x `claims` and moves no parameter by more
    than `STEP` (`natural`: the parameters on their own scale from the unconstrained ones), or `cap` steps."""
    tolerance = TOLERANCE * max(1.0, claims)
    scale = natural or (lambda v: v)
    x, steps = start, 0
    while steps < cap:
        x1, ll0 = step(x)
        x2, ll1 = step(x1)
        steps += 2
        if ll1 - ll0 < tolerance and float(np.abs(scale(x2) - scale(x1)).max(initial=0.0)) < STEP:
            # the step from x gained next to nothing: x1 is the fixed point to within the stop (x2 one more step)
            _, ll2 = step(x2)
            return Converged(x2, ll2, steps + 1, True) if ll2 >= ll1 else Converged(x1, ll1, steps, True)
        if not accelerate:
            x = x2
            continue
        r = x1 - x
        v = x2 - x1 - r
        norm_v = float(np.linalg.norm(v))
        if norm_v == 0.0 or not np.isfinite(norm_v):
            x = x2
            continue
        alpha = min(-1.0, -float(np.linalg.norm(r)) / norm_v)
        jumped = x - 2 * alpha * r + alpha**2 * v
        stabilised, ll_jumped = step(jumped)
        steps += 1
        # monotone: the jump is kept only where it does no worse than the point it left
        x = stabilised if np.isfinite(ll_jumped) and ll_jumped >= ll0 else x2
    _, ll = step(x)
    return Converged(x, ll, steps + 1, False)
