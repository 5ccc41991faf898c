"""What the cascade and voi stops share: the run's team and each `[[debate.cascade]]` team, each with its
calibration, its client and the round its turns end at."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from debate.calibration import LiveCalibration
from debate.config import CascadeTeam, DebateConfig
from debate.engine import ContinuingTeam, MarkovChain
from debate.errors import UsageError
from debate.llm import ChatClient
from debate.pipeline._runtime import Runtime
from debate.plugins import TeamFactory

__all__ = ["FIRST_TEAM", "Step", "TeamsRun", "step_config", "team_steps"]

FIRST_TEAM = "first"
"""How reports name the run's own team."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One team of the cascade as the claim's debate meets it."""

    name: str
    live: LiveCalibration
    client: ChatClient
    config: DebateConfig
    rounds: int
    """The round its turns end at, counted over the whole debate."""


class TeamsRun:
    """What the cascade and voi stops share: the run's team and each `[[debate.cascade]]` team, each with its
    calibration (each file refused, as the run's own is, before any model starts: another chain or prompts; its
    models checked once they are known, `bind_teams`)."""

    def __init__(
        self,
        runtime: Runtime,
        chain: MarkovChain,
        factory: TeamFactory,
        first: LiveCalibration,
        prompts: dict[str, str],
    ) -> None:
        debate = runtime.config.debate
        assert debate.threshold is not None
        self._runtime, self._chain, self._factory, self._first = runtime, chain, factory, first
        self._threshold = debate.threshold
        self._live = [LiveCalibration(step_config(debate, step), chain, prompts) for step in debate.cascade]

    def bind_teams(self) -> None:
        """Check each team's calibration against the models its roles run on (once the endpoints named them)."""
        for live, opened in zip(self._live, self._runtime.cascade, strict=True):
            live.bind_team(self._runtime.identities(opened))

    def _steps(self) -> list[Step]:
        return team_steps(self._runtime, self._first, self._live)

    def _continuing(self, step: Step, rounds: int) -> ContinuingTeam:
        config = step.config.model_copy(update={"max_rounds": rounds})
        team = self._factory.new_team(client=step.client, config=config, chain=self._chain)
        if not isinstance(team, ContinuingTeam):
            raise UsageError(
                f"--debate.stop {self._runtime.config.debate.stop} needs a team that can continue a debate; "
                f"{type(team).__name__} cannot (debate.engine.ContinuingTeam)"
            )
        return team


def step_config(debate: DebateConfig, step: CascadeTeam) -> DebateConfig:
    """A cascade team's debate settings: the run's, with its calibration (read at the fitted share)."""
    return debate.model_copy(update={"calibration": step.calibration, "prior": None})


def team_steps(runtime: Runtime, first: LiveCalibration, live: Sequence[LiveCalibration]) -> list[Step]:
    """The run's team, then each `[[debate.cascade]]` team, each with the round its turns end at (the cascade's
    counting: each team's max_rounds added to the earlier's)."""
    debate = runtime.config.debate
    steps = [Step(FIRST_TEAM, first, runtime.client, debate, debate.max_rounds)]
    rounds = debate.max_rounds
    for step, opened, calibration in zip(debate.cascade, runtime.cascade, live, strict=True):
        rounds += step.max_rounds
        steps.append(Step(step.name, calibration, opened.router, step_config(debate, step), rounds))
    return steps
