"""What the turns say about the share of factual claims of a latent fit: its 95% profile-likelihood interval (the
share held at each value and everything else refitted by the same EM), which decides whether a file is calibrated for
its base rate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.dynamics.latent import LatentFit
from experiments.dynamics.latent_em import LatentData, LatentEm
from experiments.dynamics.observe import Observation

__all__ = ["CHI2_95", "ShareInterval", "share_interval"]

CHI2_95 = 3.841458820694124
"""The chi-square quantile (1 df) of a 95% profile-likelihood interval."""
_EDGE = 1e-3
"""The interval is searched within [_EDGE, 1 - _EDGE]; reaching an edge reads as reaching 0 or 1."""


@dataclass(frozen=True)
class ShareInterval:
    """What the turns say about the share of factual claims: its 95% profile-likelihood interval."""

    low: float
    high: float
    standard_error: float
    """From the profile's curvature at the estimate (the observed Fisher information)."""
    claims: int
    """The claims it was fitted on (the standard error shrinks as 1 / sqrt(claims))."""


def share_interval(seen: Sequence[Observation], fit: LatentFit) -> ShareInterval:
    """The 95% profile-likelihood interval of the factual share of `fit` (fitted on `seen`): every share whose
    best fit, with the share held there and everything else refitted (EM from the fit's own responsibilities),
    loses less than half the chi-square quantile in log-likelihood."""
    data = LatentData(seen)
    if data.items != fit.items:
        raise ValueError("share_interval needs the observations the fit was made on")

    def deviance(share: float) -> float:
        _, loglik, _, _ = LatentEm(data, fit.classes, share, fit.family).run(fit.responsibilities, settle=False)
        return 2 * (fit.loglik - loglik)

    from scipy.optimize import brentq  # the experiments extra

    def side(edge: float) -> float:
        if deviance(edge) < CHI2_95:
            return 0.0 if edge < 0.5 else 1.0
        return float(brentq(lambda x: deviance(x) - CHI2_95, fit.prior, edge, xtol=1e-4))

    h = min(0.005, fit.prior / 2, (1 - fit.prior) / 2)
    curvature = max((deviance(fit.prior + h) + deviance(fit.prior - h)) / 2, 1e-12)
    return ShareInterval(
        low=side(_EDGE),
        high=side(1 - _EDGE),
        standard_error=h / math.sqrt(curvature),
        claims=len(fit.items),
    )
