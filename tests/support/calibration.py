"""A calibration file written by hand: four roles with one rate each (every other context backs off to it), so a
test can work out p_factual with a pencil."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from agents.team import AutogenTeamFactory
from debate.calibration import SMOOTHING, Calibration, Check
from debate.engine import chain_digest, load_chain

RATES = {"initial": (0.8, 0.3), "trust": (0.9, 0.4), "skeptic": (0.6, 0.1), "leader": (0.7, 0.2)}
"""P(says true | factual), P(says true | hallucinated) per role: one context each, every other backs off to it."""

FAILED_MARKOV = Check(
    name="markov", statistic=40.0, df=4, p_value=1e-8, level=0.01, rejected=True, detail="G = 40.0 on 4 df"
)


def _true(rate: float, n: int = 10) -> float:
    return rate * (n + 2 * SMOOTHING) - SMOOTHING


def _every_context(chain: str, rates: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """Counts for every context the chain can show a role (up to three verdicts), each role at its rate whatever it
    is shown: a fit that saw every turn it could be asked about."""
    built = load_chain(chain)
    return [
        {"role": role, "state": state, "label": label, "shown": list(shown), "true": _true(rate, 100), "n": 100}
        for state in built.spec.states
        for role in built.roles(state)
        for label, rate in ((True, rates[role][0]), (False, rates[role][1]))
        for k in range(4)
        for shown in itertools.product((True, False), repeat=k)
    ]


def calibration(
    model: str = "scripted",
    chain: str = "true-to-skeptic",
    checks: list[Check] | None = None,
    team: dict[str, dict[str, Any]] | None = None,
    rates: dict[str, tuple[float, float]] | None = None,
) -> Calibration:
    """A fit on `model` (`team`: each role's model identity as the fitted run recorded it; none: names only).
    `rates`: each role's (P(true | factual), P(true | hallucinated)) in every context the chain can show it (the
    fit then saw each); None: RATES in one context per role, every other backing off to it."""
    # counts whose smoothed rate (debate.calibration.SMOOTHING) is the rate in RATES
    counts = [
        {"role": role, "state": "S1", "label": label, "shown": [True], "true": _true(pair[0 if label else 1]), "n": 10}
        for role, pair in RATES.items()
        for label in (True, False)
    ]
    if rates is not None:
        counts = _every_context(chain, rates)
    built = load_chain(chain)
    checks = checks or []
    return Calibration.model_validate(
        {
            "fitted_on": {
                "model": model,
                "prompts": AutogenTeamFactory().prompt_hashes(built),
                "chain": chain,
                "chain_sha256": chain_digest(built),
                "min_rounds": 2,
                "max_rounds": 5,
                "claims": 100,
                "turns": 900,
                "factual_share": 0.5,
                "runs": ["runs/fit"],
                "team": team or {},
            },
            "classes": [{"counts": counts}],
            "shares": {"factual": [1.0], "hallucinated": [1.0]},
            "model_reason": "set by hand",
            "calls_per_turn": 1.0,
            "checks": [c.model_dump() for c in checks],
            "not_calibrated": [f"the {c.name} check fails ({c.detail})" for c in checks if c.rejected],
        }
    )


def save_calibration(tmp_path: Path, cal: Calibration) -> str:
    path = tmp_path / "cal.json"
    path.write_text(cal.model_dump_json())
    return str(path)
