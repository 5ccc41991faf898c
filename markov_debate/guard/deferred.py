"""The team `deferred`: no debate now. A claim the prefilters leave open gets no verdict, with a `deferred` failure
saying its debate runs later; `debate guard --debate later` answers on the cheap checks this way, and the desk's
worker debates the audit afterwards. Registered as an entry point of markov_debate.teams."""

from __future__ import annotations

from collections.abc import Sequence

from debate.config import DebateConfig
from debate.plugins import Chain
from debate.types import ChatClient, Claim, DebateResult, Evidence, Failure

__all__ = ["DEFERRED", "DeferredTeamFactory"]

DEFERRED = "not debated yet: the debate runs after the answer is returned (guard --debate later)"


# One result for every deferred claim (the types are frozen): it is built on the guard's request path.
_NOT_YET = DebateResult(
    rounds=0,
    consensus=None,
    stop_reason="no_debate",
    states=[],
    final=None,
    failure=Failure(kind="deferred", message=DEFERRED, stage="debate"),
)


class _Deferred:
    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        return _NOT_YET


class DeferredTeamFactory:
    """Makes teams that debate nothing now (see the module docstring)."""

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompts_dir = prompts_dir

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: Chain) -> _Deferred:
        return _Deferred()

    def prompt_hashes(self, chain: Chain) -> dict[str, str]:
        return {}
