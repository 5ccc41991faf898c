"""The posterior stop over an interval of base rates: a calibration fitted without enough labels to pin the share of
factual claims says so with an interval, and the stop then decides only where P(factual) passes the threshold for
every share in it. P(factual) rises with the share, so the interval's ends are its worst cases: a claim is decided
factual once P(factual) at the lowest share passes P, non-factual once P(factual) at the highest share is at most
1 - P."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from debate.engine._driver import TurnRecord
from debate.engine._posterior import Governor, TurnContext, turn_contexts
from debate.plugins import Chain

__all__ = ["IntervalGovernor", "worst_case"]


def worst_case(low: float | None, high: float | None) -> float | None:
    """The P(factual) the stop reads from its value at the interval's lowest and highest share: the one nearer
    1/2 when both are on one side, 1/2 when they disagree (undecided whatever the threshold)."""
    if low is None or high is None:
        return None
    if low > 0.5:
        return low
    if high < 0.5:
        return high
    return 0.5


@dataclass(frozen=True)
class IntervalGovernor:
    """A governor over the share interval's two ends (each a governor of its own: one team's model, or a cascade's
    segmented posterior at each team's end)."""

    low: Governor
    """At the interval's lowest share of factual claims."""
    high: Governor
    """At its highest."""

    def p_factual(self, turns: Sequence[TurnContext]) -> float | None:
        return worst_case(self.low.p_factual(turns), self.high.p_factual(turns))

    def p_debate(self, chain: Chain, records: Sequence[TurnRecord]) -> float | None:
        contexts = turn_contexts(chain, records)
        return self.p_factual(contexts) if records and len(contexts) == len(records) else None
