"""The cascade stop (`stop = "cascade:P"`): a claim the run's team leaves undecided (P(factual) between 1 - P and P
when its rounds run out) goes to the next team of `[[debate.cascade]]`, which continues the same debate from the
turns so far, until a team decides it or the list ends.

Each team's turns are read by that team's calibration, starting from the P(factual) the earlier teams left
(debate.engine.SegmentedPosterior), and each team's calibration is checked against that team's models as the run's
own is against its own. The claim's transcript keeps every turn; `DebateResult.teams` says which team spoke which
turns, at what cost, and which decided."""

from __future__ import annotations

from collections.abc import Sequence

from debate.calibration import LiveCalibration
from debate.config import CascadeTeam, DebateConfig
from debate.engine import ContinuingTeam, MarkovChain, PosteriorModel, SegmentedPosterior, TurnRecord, result_records
from debate.errors import UsageError
from debate.pipeline._runtime import Runtime
from debate.pipeline._teams import OpenedTeam
from debate.plugins import TeamFactory
from debate.types import (
    CalibrationNote,
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    TeamPart,
    Usage,
    turns_by_model,
)

__all__ = ["CASCADE_ASSUMPTION", "FIRST_TEAM", "Escalation", "cascade_note"]

FIRST_TEAM = "first"
"""How reports name the run's own team."""


CASCADE_ASSUMPTION = (
    "cascade: each later team's turns are read by its own calibration from the P(factual) the earlier teams left, "
    "taken as evidence independent of theirs given the claim's label"
)
"""What an escalated claim's p_factual assumes, said on every report with one."""


def _part(name: str, first: int, records: Sequence[TurnRecord], p: float | None, live: LiveCalibration) -> TeamPart:
    spoken = [r.turn for r in records[first:]]
    calibration = live.current()
    warning = calibration.warning()
    if live.other_team is not None:
        warning = f"not calibrated: it {live.other_team}" + (f"; {warning}" if warning else "")
    return TeamPart(
        name=name,
        first_turn=first,
        turns=len(spoken),
        usage=Usage.total(t.call.usage for t in spoken),
        usage_by_model=turns_by_model(spoken),
        p_factual=p,
        calibrated=calibration.calibrated and live.other_team is None,
        warning=warning,
    )


def cascade_note(note: CalibrationNote, verdicts: Sequence[ClaimVerdict]) -> CalibrationNote:
    """A report's calibration note with every calibration that read its claims' turns: a later team whose
    calibration is not calibrated makes the report's p_factual not calibrated, its warning named by the team; and
    an escalated claim's independence assumption is said."""
    later: dict[str, TeamPart] = {}
    for verdict in verdicts:
        if verdict.debate is not None:
            later.update({t.name: t for t in verdict.debate.teams[1:]})
    if not later:
        return note
    warnings = [note.warning] if note.warning else []
    warnings += [f"team {name}: {t.warning}" for name, t in later.items() if t.warning]
    warnings.append(CASCADE_ASSUMPTION)
    calibrated = note.calibrated and all(t.calibrated is not False for t in later.values())
    return note.model_copy(update={"calibrated": calibrated, "warning": "; ".join(warnings)})


class Escalation:
    """The run's team, then each cascade team in turn, over one claim."""

    def __init__(
        self,
        runtime: Runtime,
        chain: MarkovChain,
        factory: TeamFactory,
        first: LiveCalibration,
        prompts: dict[str, str],
    ) -> None:
        debate = runtime.config.debate
        assert debate.threshold is not None and debate.cascade
        self._runtime, self._chain, self._factory, self._first = runtime, chain, factory, first
        self._threshold = debate.threshold
        # Each team's file is refused, as the run's own is, before any model starts (another chain or prompts); its
        # models are checked once they are known (`bind`).
        self._live = [LiveCalibration(self._step_config(step), chain, prompts) for step in debate.cascade]

    def _step_config(self, step: CascadeTeam) -> DebateConfig:
        return self._runtime.config.debate.model_copy(update={"calibration": step.calibration, "prior": None})

    def bind(self) -> None:
        """Check each team's calibration against the models its roles run on (once the endpoints named them)."""
        for live, opened in zip(self._live, self._runtime.cascade, strict=True):
            live.bind_team(self._runtime.identities(opened))

    def _decided(self, p: float | None) -> bool:
        return p is not None and (p >= self._threshold or p <= 1 - self._threshold)

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> tuple[DebateResult, float | None]:
        """The claim's whole debate and its P(factual) under the teams' calibrations."""
        runtime, debate = self._runtime, self._runtime.config.debate
        first = self._factory.new_team(client=runtime.client, config=debate, chain=self._chain)
        result = await first.debate(claim, evidence)
        models: list[PosteriorModel] = [self._first.current().model(debate.prior)]
        starts = [0]
        records = result_records(result)
        p = SegmentedPosterior(models, starts).p_debate(self._chain, records)
        parts = [_part(FIRST_TEAM, 0, records, p, self._first)]
        rounds = debate.max_rounds
        for step, opened, live in zip(debate.cascade, runtime.cascade, self._live, strict=True):
            if result.final is None or result.failure is not None or p is None or self._decided(p):
                break
            models.append(live.current().model())
            starts.append(len(records))
            rounds += step.max_rounds
            result = await self._continue(step, opened, claim, evidence, result, models, starts, rounds)
            records = result_records(result)
            p = SegmentedPosterior(models, starts).p_debate(self._chain, records)
            parts.append(_part(step.name, starts[-1], records, p, live))
        parts[-1] = parts[-1].model_copy(update={"decided": self._decided(p)})
        return result.model_copy(update={"teams": parts}), p

    async def _continue(
        self,
        step: CascadeTeam,
        opened: OpenedTeam,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        models: list[PosteriorModel],
        starts: list[int],
        rounds: int,
    ) -> DebateResult:
        config = self._step_config(step).model_copy(update={"max_rounds": rounds})
        team = self._factory.new_team(client=opened.router, config=config, chain=self._chain)
        if not isinstance(team, ContinuingTeam):
            raise UsageError(
                f"the cascade stop needs a team that can continue a debate; {type(team).__name__} cannot "
                "(debate.engine.ContinuingTeam)"
            )
        governor = SegmentedPosterior(list(models), list(starts))
        return await team.continue_debate(
            claim, evidence, earlier, governor=governor, threshold=self._threshold, max_rounds=rounds
        )
