"""The team the cascade stop escalates to: one that can take over a debate another team started."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from debate.engine._posterior import Governor
from debate.plugins import Team
from debate.types import Claim, DebateResult, Evidence

__all__ = ["ContinuingTeam"]


@runtime_checkable
class ContinuingTeam(Team, Protocol):
    """A team that can take over a debate another team started (the cascade stop escalates to one)."""

    async def continue_debate(
        self,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        *,
        governor: Governor,
        threshold: float,
        max_rounds: int,
    ) -> DebateResult:
        """`earlier`'s transcript continued by this team's agents from the chain's next turn, stopping once
        `governor`'s P(factual | every turn so far) is at least `threshold` or at most 1 - `threshold`, else after
        round `max_rounds` (counted over the whole debate); the whole transcript is returned."""
        ...
