"""The cascade stop (`stop = "cascade:P"`): a claim the run's team leaves undecided (P(factual) between 1 - P and P
when its rounds run out) goes to the next team of `[[debate.cascade]]`, which continues the same debate from the
turns so far, until a team decides it or the list ends.

Each team's turns are read by that team's calibration, starting from the P(factual) the earlier teams left
(debate.engine.SegmentedPosterior), and each team's calibration is checked against that team's models as the run's
own is against its own. The claim's transcript keeps every turn; `DebateResult.teams` says which team spoke which
turns, at what cost, and which decided."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from debate.calibration import LiveCalibration
from debate.engine import (
    NO_TURNS,
    Ends,
    Governor,
    IntervalGovernor,
    MarkovChain,
    PosteriorModel,
    SegmentedPosterior,
    StopCheck,
    TeamReach,
    TurnRecord,
    cascade_reach,
    position_after,
    reach_from,
    result_records,
    segment_events,
    turn_contexts,
)
from debate.errors import UsageError
from debate.pipeline._runtime import Runtime
from debate.pipeline._teams_run import FIRST_TEAM, Step, TeamsRun
from debate.plugins import TeamFactory
from debate.types import (
    CalibrationNote,
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    Failure,
    TeamPart,
    Usage,
    turns_by_model,
)

log = logging.getLogger(__name__)

__all__ = ["CASCADE_ASSUMPTION", "FIRST_TEAM", "Escalation", "cascade_note", "team_part"]


CASCADE_ASSUMPTION = (
    "cascade: each later team's turns are read by its own calibration from the P(factual) the earlier teams left, "
    "taken as evidence independent of theirs given the claim's label"
)
"""What an escalated claim's p_factual assumes, said on every report with one."""


def team_part(
    name: str, first: int, records: Sequence[TurnRecord], p: float | None, live: LiveCalibration, why: str | None
) -> TeamPart:
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
        out_of_reach=why,
    )


def cascade_note(note: CalibrationNote, verdicts: Sequence[ClaimVerdict]) -> CalibrationNote:
    """A report's calibration note with every calibration that read its claims' turns: a later team whose
    calibration is not calibrated makes the report's p_factual not calibrated, its warning named by the team; and
    an escalated claim's independence assumption is said."""
    later: dict[str, TeamPart] = {}
    unreached: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.debate is not None:
            later.update({t.name: t for t in verdict.debate.teams[1:] if t.turns})
            for t in verdict.debate.teams:
                if t.out_of_reach is not None:
                    unreached[t.name] = unreached.get(t.name, 0) + 1
    if not later and not unreached:
        return note
    warnings = [note.warning] if note.warning else []
    warnings += [f"team {name}: {t.warning}" for name, t in later.items() if t.warning]
    warnings += [
        f"team {name} stopped or was skipped on {n} claim{'s' * (n != 1)}: the threshold was out of its reach"
        for name, n in unreached.items()
    ]
    if later:
        warnings.append(CASCADE_ASSUMPTION)
    calibrated = note.calibrated and all(t.calibrated is not False for t in later.values())
    return note.model_copy(update={"calibrated": calibrated, "warning": "; ".join(warnings)})


class Escalation(TeamsRun):
    """The run's team, then each cascade team in turn, over one claim. A team whose turns cannot take p_factual to
    the threshold from where it is handed the claim is skipped (no call), and a team hands over as soon as the
    threshold is out of its reach (debate.engine.reach_from)."""

    def __init__(
        self,
        runtime: Runtime,
        chain: MarkovChain,
        factory: TeamFactory,
        first: LiveCalibration,
        prompts: dict[str, str],
    ) -> None:
        super().__init__(runtime, chain, factory, first, prompts)
        self._reach: dict[tuple[object, ...], bool] = {}
        self._plan: tuple[tuple[int, ...], list[TeamReach]] | None = None

    def bind(self) -> None:
        """Check each team's calibration against its models, and say at start which team cannot reach the
        threshold (it is skipped); refuse a run no team can decide."""
        self.bind_teams()
        lines = self.plan_lines()
        if all(not reach.decidable for reach in self.plan()):
            raise UsageError(
                f"--debate.stop {self._runtime.config.debate.stop}: no team of the cascade can take p_factual to the "
                f"threshold in its rounds, so none would be asked ({'; '.join(lines)}); lower the threshold or give "
                "the teams more rounds"
            )
        for line in lines:
            log.warning("cascade: %s", line)

    def _ends(self, steps: Sequence[Step]) -> list[tuple[PosteriorModel, ...]]:
        """Each team's model, or its share interval's two ends (Calibration.ends); when any team has two, every
        team has two (a single model twice), so the teams' segments line up end by end."""
        prior = self._runtime.config.debate.prior
        ends = [s.live.current().ends(prior if k == 0 else None) for k, s in enumerate(steps)]
        width = 2 if any(isinstance(e, tuple) for e in ends) else 1
        return [e if isinstance(e, tuple) else (e,) * width for e in ends]

    def plan(self) -> list[TeamReach]:
        """Each team's reach over the claims it may be handed (debate.engine.cascade_reach), for the calibration
        files as they are now."""
        steps = self._steps()
        ends = self._ends(steps)
        key = tuple(id(m) for e in ends for m in e)
        if self._plan is None or self._plan[0] != key:
            reach = cascade_reach(
                [_one(e) for e in ends], self._chain, threshold=self._threshold, rounds=[s.rounds for s in steps]
            )
            self._plan = (key, reach)
        return self._plan[1]

    def plan_lines(self) -> list[str]:
        """What start says about a team that is skipped or never handed a claim."""
        steps = self._steps()
        return [
            reach.said(step.name, self._threshold)
            for step, reach in zip(steps, self.plan(), strict=True)
            if not reach.decidable
        ]

    def _decided(self, p: float | None) -> bool:
        return p is not None and (p >= self._threshold or p <= 1 - self._threshold)

    def _out_of_reach(
        self, k: int, ends: Ends, handed: tuple[float, ...] | None, records: Sequence[TurnRecord], segment: _Segment
    ) -> str | None:
        """Why team `k` (handed P(factual) `handed` under each end, `ends` moved there) cannot decide the claim from
        here in its rounds; None: it can."""
        contexts = turn_contexts(self._chain, records)[segment.first :]
        position = position_after(self._chain, records)
        if position.round > segment.rounds:
            return None  # no turn left: the round limit ends the team, not its reach
        key = (k, handed, position, segment_events(contexts), segment.rounds)
        if key in self._reach:
            return None if self._reach[key] else "out of reach"
        reach = reach_from(
            ends,
            self._chain,
            position,
            contexts,
            threshold=self._threshold,
            max_rounds=segment.rounds,
            stop_at_decidable=True,
        )
        decidable = reach.decidable(self._threshold)
        if len(self._reach) > 100_000:
            self._reach.clear()  # a bound on memory; the entries are recomputed as needed
        self._reach[key] = decidable
        return None if decidable else reach.said(self._threshold)

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> tuple[DebateResult, float | None]:
        """The claim's whole debate and its P(factual) under the teams' calibrations: said at each calibration's
        fitted share (or the run's prior), while the stop reads each team's ends (the share interval's worst case
        where a file has one)."""
        steps = self._steps()
        prior = self._runtime.config.debate.prior
        points = [s.live.current().model(prior if k == 0 else None) for k, s in enumerate(steps)]
        ends = self._ends(steps)
        result, records = NO_TURNS, list[TurnRecord]()
        used: list[int] = []
        starts: list[int] = []
        parts: list[TeamPart] = []
        handed: tuple[float, ...] | None = None
        stop_p: float | None = None
        for k, step in enumerate(steps):
            if result.failure is not None or self._decided(stop_p):
                break
            moved = _one(
                ends[k] if handed is None else tuple(m.at_prior(p) for m, p in zip(ends[k], handed, strict=True))
            )
            segment = _Segment(first=len(records), rounds=step.rounds)
            why = self._out_of_reach(k, moved, handed, records, segment)
            if why is not None:
                parts.append(
                    _skipped(
                        step.name, segment.first, _said(points, used, starts, self._chain, records), step.live, why
                    )
                )
                continue
            used.append(k)
            starts.append(segment.first)
            governors = [SegmentedPosterior([ends[i][e] for i in used], list(starts)) for e in range(len(ends[k]))]
            stop_governor = governors[0] if len(governors) == 1 else IntervalGovernor(governors[0], governors[1])
            stopped: list[str] = []
            check = self._checker(k, moved, handed, segment, stopped)
            result = await self._continue(step, claim, evidence, result, stop_governor, check)
            records = result_records(result, self._chain)
            stop_p = stop_governor.p_debate(self._chain, records)
            ps = [g.p_debate(self._chain, records) for g in governors]
            handed = None if any(p is None for p in ps) else tuple(p for p in ps if p is not None)
            if stopped and not self._decided(stop_p) and result.failure is None:
                result = result.model_copy(update={"stop_reason": "out_of_reach"})
            p = _said(points, used, starts, self._chain, records)
            parts.append(team_part(step.name, segment.first, records, p, step.live, stopped[0] if stopped else None))
        parts[-1] = parts[-1].model_copy(update={"decided": self._decided(stop_p)})
        if not records:  # every team was skipped (a calibration file changed since start): no turn, no verdict
            result = _unreached(parts)
        return result.model_copy(update={"teams": parts}), _said(points, used, starts, self._chain, records)

    def _checker(
        self, k: int, ends: Ends, handed: tuple[float, ...] | None, segment: _Segment, stopped: list[str]
    ) -> StopCheck:
        """The stop a team runs under besides the threshold: out of reach from where it stands (the reason kept in
        `stopped`)."""

        def check(so_far: Sequence[TurnRecord]) -> str | None:
            why = self._out_of_reach(k, ends, handed, so_far, segment)
            if why is not None:
                stopped.append(why)
            return why

        return check

    async def _continue(
        self,
        step: Step,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        governor: Governor,
        check: StopCheck,
    ) -> DebateResult:
        team = self._continuing(step, step.rounds)
        return await team.continue_debate(
            claim, evidence, earlier, governor=governor, threshold=self._threshold, max_rounds=step.rounds, until=check
        )


@dataclasses.dataclass(frozen=True)
class _Segment:
    """A team's part of the claim's debate."""

    first: int
    """Its first turn."""
    rounds: int
    """The round its turns end at."""


def _one(ends: tuple[PosteriorModel, ...]) -> Ends:
    return ends[0] if len(ends) == 1 else (ends[0], ends[1])


def _said(
    points: Sequence[PosteriorModel],
    used: Sequence[int],
    starts: Sequence[int],
    chain: MarkovChain,
    records: Sequence[TurnRecord],
) -> float | None:
    """P(factual) as reports say it: each team that spoke read at its calibration's fitted share (the run's at its
    prior), from where the earlier teams left it; None before any turn."""
    if not used:
        return None
    return SegmentedPosterior([points[i] for i in used], list(starts)).p_debate(chain, records)


def _skipped(name: str, first: int, p: float | None, live: LiveCalibration, why: str) -> TeamPart:
    calibration = live.current()
    return TeamPart(
        name=name,
        first_turn=first,
        turns=0,
        p_factual=p,
        calibrated=calibration.calibrated and live.other_team is None,
        out_of_reach=why,
    )


def _unreached(parts: Sequence[TeamPart]) -> DebateResult:
    reasons = "; ".join(f"{part.name}: {part.out_of_reach}" for part in parts)
    failure = Failure(
        kind="usage",
        message=f"no team of the cascade can take p_factual to the threshold, so none was asked ({reasons})",
        stage="debate",
    )
    return DebateResult(rounds=0, consensus=None, stop_reason="failed", states=[], final=None, failure=failure)
