"""The team the cascade stop escalates to: one that can take over a debate another team started."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from debate.engine._driver import TurnRecord
from debate.engine._posterior import Governor
from debate.plugins import Team
from debate.types import Claim, DebateResult, Evidence

__all__ = ["NO_TURNS", "ContinuingTeam", "StopCheck"]

StopCheck = Callable[[Sequence[TurnRecord]], str | None]
"""Asked after each turn with every turn so far: a reason to stop the team now (None: go on)."""

NO_TURNS = DebateResult(rounds=0, consensus=None, stop_reason="no_debate", states=[], final=None)
"""The `earlier` of a team that starts the debate itself."""


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
        until: StopCheck | None = None,
    ) -> DebateResult:
        """`earlier`'s transcript continued by this team's agents from the chain's next turn (`earlier` may have no
        turn: the team starts the debate), stopping once `governor`'s P(factual | every turn so far) is at least
        `threshold` or at most 1 - `threshold`, once `until` gives a reason after a turn, else after round
        `max_rounds` (counted over the whole debate); the whole transcript is returned."""
        ...
