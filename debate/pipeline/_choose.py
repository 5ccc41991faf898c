"""The voi stop (`stop = "voi:P"`, a named departure from the paper): before each turn, the team (the run's own or a
`[[debate.cascade]]` team) whose speaking the chain's next turns is expected to lower the decision's error most per
dollar speaks the next one (debate.engine.turn_worth, a lookahead of up to `LOOKAHEAD` turns), until p_factual
passes P, no team can take it there in the rounds left, or no team's calibration saw the next turn's context.

A team only speaks a turn whose context its calibration's fit saw (its rate estimated from turns, not a back-off)
and only where some run of its turns can still pass the threshold (debate.engine.reach_from). The turns a team
speaks in a row are read by its calibration from the P(factual) the turns before left (as the cascade reads each
team's), so a team that speaks again starts a new segment; the report's `teams` lists the segments and `choices`
why each turn went where it did. The chain's speakers and states are the chain's: the stop chooses who answers, not
which role."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from debate.calibration import LiveCalibration
from debate.engine import (
    NO_TURNS,
    ContinuingTeam,
    Ends,
    IntervalGovernor,
    MarkovChain,
    Position,
    PosteriorModel,
    SegmentedPosterior,
    TurnRecord,
    Worth,
    context_seen,
    ends_of,
    governed_result,
    next_context,
    position_after,
    reach_from,
    result_records,
    transcript_result,
    turn_contexts,
    turn_worth,
)
from debate.errors import UsageError
from debate.pipeline._escalate import Step, team_part, team_steps
from debate.pipeline._prices import Price, price_for
from debate.pipeline._runtime import Runtime
from debate.plugins import TeamFactory
from debate.types import Claim, DebateResult, Evidence, TurnChoice

__all__ = ["LOOKAHEAD", "Chooser"]

log = logging.getLogger(__name__)

LOOKAHEAD = 3
"""The most turns a team's worth looks ahead: a turn alone rarely moves the decision when two or three would."""

_TOKENS = (1000.0, 100.0)
"""Input and output tokens a turn is priced at before the run has seen one of its role (only the ratio of the
teams' prices matters until then: every team is shown the same prompts)."""


@dataclasses.dataclass(frozen=True)
class _Segment:
    team: int
    first: int
    ends: Ends
    """The team's reader moved to the P(factual) the segment started at."""


@dataclasses.dataclass(frozen=True)
class _Option:
    team: int
    worth: Worth
    ends: Ends


class Chooser:
    """Runs each claim's debate turn by turn, each turn by the team worth most (see the module)."""

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
        self._live = [
            LiveCalibration(debate.model_copy(update={"calibration": s.calibration, "prior": None}), chain, prompts)
            for s in debate.cascade
        ]
        self._limit = debate.max_rounds + sum(s.max_rounds for s in debate.cascade)
        self._tokens: dict[str, tuple[float, float, int]] = {}
        self._prices: list[dict[str, Price | None]] = []

    def bind(self) -> None:
        """Check each team's calibration against its models, price each team's roles, and refuse a run no team can
        decide from the start."""
        for live, opened in zip(self._live, self._runtime.cascade, strict=True):
            live.bind_team(self._runtime.identities(opened))
        self._prices = [self._team_prices(k) for k in range(len(self._steps()))]
        start = Position(self._chain.spec.initial, None, (), 0)
        lines = []
        for step, ends in zip(self._steps(), self._ends(), strict=True):
            reach = reach_from(ends, self._chain, start, (), threshold=self._threshold, max_rounds=self._limit)
            if not reach.decidable(self._threshold):
                lines.append(f"team {step.name} alone: {reach.said(self._threshold)}")
        if len(lines) == len(self._steps()):
            raise UsageError(
                f"--debate.stop {self._runtime.config.debate.stop}: no team can take p_factual to the threshold "
                f"alone in {self._limit} rounds ({'; '.join(lines)}); lower the threshold or give more rounds"
            )
        for line in lines:
            log.warning("voi: %s (it may still speak where the others leave p_factual)", line)

    def _steps(self) -> list[Step]:
        return team_steps(self._runtime, self._first, self._live)

    def _ends(self) -> list[Ends]:
        prior = self._runtime.config.debate.prior
        ends = [s.live.current().ends(prior if k == 0 else None) for k, s in enumerate(self._steps())]
        if any(isinstance(e, tuple) for e in ends):
            return [e if isinstance(e, tuple) else (e, e) for e in ends]
        return ends

    def _team_prices(self, k: int) -> dict[str, Price | None]:
        config, runtime = self._runtime.config, self._runtime
        opened = runtime.cascade[k - 1] if k else None
        identities = runtime.identities(opened)
        prices: dict[str, Price | None] = {}
        for role in self._chain.spec.all_roles():
            model = config.model_for(role) if k == 0 else config.debate.cascade[k - 1].model_for(role, config.model)
            prices[role] = price_for(model, embedded=runtime.embedded, name=identities[role].name)
        return prices

    def _cost(self, k: int, role: str) -> float:
        """One turn of `role` by team `k`: its model's price at the run's mean tokens per turn of the role, in
        dollars; in calls when some team's model has no price."""
        calls = self._steps()[k].live.current().calls_per_turn
        if self._unit() == "calls":
            return calls
        price = self._prices[k][role]
        assert price is not None
        tokens_in, tokens_out, _ = self._tokens.get(role, (*_TOKENS, 0))
        return max((tokens_in * price.input + tokens_out * price.output) / 1e6, 1e-12)

    def _unit(self) -> str:
        return "calls" if any(p is None for team in self._prices for p in team.values()) else "usd"

    def _learn(self, records: Sequence[TurnRecord]) -> None:
        """Keep each role's mean tokens per turn (what a turn is priced at)."""
        turn = records[-1].turn
        usage = turn.call.usage
        tokens_in, tokens_out, n = self._tokens.get(turn.role, (0.0, 0.0, 0))
        if usage.llm_calls:
            mean = (
                (tokens_in * n + usage.prompt_tokens) / (n + 1),
                (tokens_out * n + usage.completion_tokens) / (n + 1),
            )
            self._tokens[turn.role] = (*mean, n + 1)

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> tuple[DebateResult, float | None]:
        """The claim's debate, turn by turn; its P(factual) at each calibration's fitted share."""
        steps, ends = self._steps(), self._ends()
        prior = self._runtime.config.debate.prior
        points = [s.live.current().model(prior if k == 0 else None) for k, s in enumerate(steps)]
        result, records = NO_TURNS, list[TurnRecord]()
        segments: list[_Segment] = []
        choices: list[TurnChoice] = []
        while True:
            stop = self._stop_governor(ends, segments)
            value = stop.p_debate(self._chain, records) if records else None
            decided = value is not None and (value >= self._threshold or value <= 1 - self._threshold)
            position = position_after(self._chain, records)
            if decided or position.round > self._limit or result.failure is not None:
                reason = "posterior" if decided else "max_rounds"
                break
            handed = self._handed(ends, segments, records)
            options, passed = self._options(ends, segments, records, position, handed)
            if not options:
                reason = "unseen" if all("did not see" in p for p in passed) else "out_of_reach"
                choices.append(_stopped(len(records), value, passed))
                break
            chosen = max(options, key=lambda o: (o.worth.ratio, -o.worth.cost))
            choices.append(self._choice(chosen, records, value, options, passed, steps))
            if not segments or segments[-1].team != chosen.team:
                segments.append(_Segment(chosen.team, len(records), chosen.ends))
            result = await self._one_turn(steps[chosen.team], claim, evidence, result, ends, segments)
            records = result_records(result, self._chain)
            if records and result.failure is None:
                self._learn(records)
        final = governed_result(transcript_result(records), value, self._threshold) if records else result
        if records and not decided and result.failure is None:
            final = final.model_copy(update={"stop_reason": reason})
        p = _point(points, segments, self._chain, records)
        parts = []
        for i, s in enumerate(segments):
            upto = records[: _end(segments, i, records)]
            said = _point(points, segments[: i + 1], self._chain, upto)
            parts.append(team_part(steps[s.team].name, s.first, upto, said, steps[s.team].live, None))
        return final.model_copy(update={"teams": parts, "choices": choices}), p

    def _stop_governor(
        self, ends: Sequence[Ends], segments: Sequence[_Segment]
    ) -> SegmentedPosterior | IntervalGovernor:
        width = len(ends_of(ends[0]))
        governors = [
            SegmentedPosterior([ends_of(ends[s.team])[e] for s in segments], [s.first for s in segments])
            for e in range(width)
        ]
        return governors[0] if width == 1 else IntervalGovernor(governors[0], governors[1])

    def _handed(
        self, ends: Sequence[Ends], segments: Sequence[_Segment], records: Sequence[TurnRecord]
    ) -> tuple[float, ...] | None:
        """P(factual) under each end after the turns so far (None: none yet, each team at its own prior)."""
        if not records:
            return None
        width = len(ends_of(ends[0]))
        ps = [
            SegmentedPosterior([ends_of(ends[s.team])[e] for s in segments], [s.first for s in segments]).p_debate(
                self._chain, records
            )
            for e in range(width)
        ]
        return None if any(p is None for p in ps) else tuple(p for p in ps if p is not None)

    def _options(
        self,
        ends: Sequence[Ends],
        segments: Sequence[_Segment],
        records: Sequence[TurnRecord],
        position: Position,
        handed: tuple[float, ...] | None,
    ) -> tuple[list[_Option], list[str]]:
        """Each team that may speak the next turn with its worth, and each that may not with why."""
        role, state, shown = next_context(self._chain, position)
        options, passed = [], []
        for k, step in enumerate(self._steps()):
            if not context_seen(ends_of(ends[k])[0], role, state, shown):
                passed.append(f"{step.name}: its calibration did not see the {role} in {state} shown {list(shown)}")
                continue
            if segments and segments[-1].team == k:
                moved, base = segments[-1].ends, turn_contexts(self._chain, records)[segments[-1].first :]
            else:
                moved, base = _moved(ends[k], handed), []
            reach = reach_from(
                moved,
                self._chain,
                position,
                base,
                threshold=self._threshold,
                max_rounds=self._limit,
                stop_at_decidable=True,
            )
            if not reach.decidable(self._threshold):
                passed.append(f"{step.name}: {reach.said(self._threshold)} in the rounds left")
                continue
            worth = turn_worth(
                moved,
                self._chain,
                position,
                base,
                threshold=self._threshold,
                max_rounds=self._limit,
                depth=LOOKAHEAD,
                cost=self._cost_of(k),
            )
            if worth is not None:
                options.append(_Option(k, worth, moved))
        return options, passed

    def _cost_of(self, k: int) -> Callable[[str], float]:
        return lambda role: self._cost(k, role)

    def _choice(
        self,
        chosen: _Option,
        records: Sequence[TurnRecord],
        value: float | None,
        options: Sequence[_Option],
        passed: Sequence[str],
        steps: Sequence[Step],
    ) -> TurnChoice:
        unit = self._unit()
        role = next_context(self._chain, position_after(self._chain, records))[0]
        per = "per dollar" if unit == "usd" else "per call"
        others = [
            f"{steps[o.team].name}: {o.worth.ratio:.3g} {per} over {o.worth.depth}" for o in options if o is not chosen
        ]
        worth = chosen.worth
        error = 0.5 if value is None else min(value, 1 - value)
        why = (
            f"{steps[chosen.team].name}: expected error {error:.4f} -> {worth.error_after:.4f} over {worth.depth} "
            f"turn{'s' * (worth.depth > 1)} at {worth.cost:.3g} {unit}, {worth.ratio:.3g} {per}"
        )
        if others or passed:
            why += "; passed over: " + "; ".join([*others, *passed])
        return TurnChoice(
            turn=len(records),
            team=steps[chosen.team].name,
            role=role,
            p_factual=value,
            error=min(error, 0.5),
            expected_error=min(max(worth.error_after, 0.0), 0.5),
            depth=worth.depth,
            cost=max(worth.cost, 0.0),
            unit="calls" if unit == "calls" else "usd",
            why=why,
        )

    async def _one_turn(
        self,
        step: Step,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        ends: Sequence[Ends],
        segments: Sequence[_Segment],
    ) -> DebateResult:
        config = step.config.model_copy(update={"max_rounds": self._limit})
        team = self._factory.new_team(client=step.client, config=config, chain=self._chain)
        if not isinstance(team, ContinuingTeam):
            raise UsageError(
                f"the voi stop needs a team that can continue a debate; {type(team).__name__} cannot "
                "(debate.engine.ContinuingTeam)"
            )
        before = len(result_records(earlier, self._chain))
        return await team.continue_debate(
            claim,
            evidence,
            earlier,
            governor=self._stop_governor(ends, segments),
            threshold=self._threshold,
            max_rounds=self._limit,
            until=lambda so_far: "one turn taken" if len(so_far) > before else None,
        )


def _moved(ends: Ends, handed: tuple[float, ...] | None) -> Ends:
    if handed is None:
        return ends
    models = tuple(m.at_prior(p) for m, p in zip(ends_of(ends), handed, strict=True))
    return models[0] if len(models) == 1 else (models[0], models[1])


def _point(
    points: Sequence[PosteriorModel], segments: Sequence[_Segment], chain: MarkovChain, records: Sequence[TurnRecord]
) -> float | None:
    if not segments or not records:
        return None
    return SegmentedPosterior([points[s.team] for s in segments], [s.first for s in segments]).p_debate(chain, records)


def _end(segments: Sequence[_Segment], i: int, records: Sequence[TurnRecord]) -> int:
    return segments[i + 1].first if i + 1 < len(segments) else len(records)


def _stopped(turns: int, value: float | None, passed: Sequence[str]) -> TurnChoice:
    error = 0.5 if value is None else min(value, 1 - value)
    return TurnChoice(
        turn=turns, team=None, p_factual=value, error=min(error, 0.5), why="stopped: " + "; ".join(passed)
    )
