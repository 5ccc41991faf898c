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
from typing import Literal

from debate.calibration import LiveCalibration
from debate.config import VerifierConfig
from debate.engine import (
    NO_TURNS,
    Decision,
    MarkovChain,
    Position,
    Spoken,
    TeamView,
    TurnContext,
    TurnPolicy,
    TurnRecord,
    ends_of,
    governed_result,
    next_context,
    position_of,
    reach_from,
    result_records,
    transcript_result,
    turn_contexts,
)
from debate.errors import UsageError
from debate.pipeline._escalate import team_part
from debate.pipeline._prices import Price, price_for
from debate.pipeline._runtime import Runtime
from debate.pipeline._teams_run import Step, TeamsRun
from debate.plugins import Chain, TeamFactory
from debate.types import Claim, DebateResult, Evidence, TurnChoice

__all__ = ["LOOKAHEAD", "TURN_TOKENS", "Chooser", "voi_limit"]

log = logging.getLogger(__name__)

LOOKAHEAD = 3
"""The most turns a team's worth looks ahead: a turn alone rarely moves the decision when two or three would."""

TURN_TOKENS = (1000.0, 100.0)
"""Input and output tokens a turn is priced at before the run has seen one of its role (only the ratio of the
teams' prices matters until then: every team is shown the same prompts)."""


class Chooser(TeamsRun):
    """Runs each claim's debate turn by turn, each turn by the team worth most (debate.engine.TurnPolicy)."""

    def __init__(
        self,
        runtime: Runtime,
        chain: MarkovChain,
        factory: TeamFactory,
        first: LiveCalibration,
        prompts: dict[str, str],
    ) -> None:
        super().__init__(runtime, chain, factory, first, prompts)
        self._limit = voi_limit(runtime.config)
        self._tokens: dict[str, tuple[float, float, int]] = {}
        self._reach: dict[tuple[object, ...], str | None] = {}
        self._cache_key: tuple[int, ...] = ()
        self._prices: list[dict[str, Price | None]] = []

    def bind(self) -> None:
        """Check each team's calibration against its models, price each team's roles, and refuse a run no team can
        decide from the start."""
        self.bind_teams()
        self._prices = [self._team_prices(k) for k in range(len(self._steps()))]
        start = Position(self._chain.spec.initial, None, (), 0)
        lines = []
        for team in self.policy().teams:
            reach = reach_from(team.ends, self._chain, start, (), threshold=self._threshold, max_rounds=self._limit)
            if not reach.decidable(self._threshold):
                lines.append(f"team {team.name} alone: {reach.said(self._threshold)}")
        if len(lines) == len(self._steps()):
            raise UsageError(
                f"--debate.stop {self._runtime.config.debate.stop}: no team can take p_factual to the threshold "
                f"alone in {self._limit} rounds ({'; '.join(lines)}); lower the threshold or give more rounds"
            )
        for line in lines:
            log.warning("voi: %s (it may still speak where the others leave p_factual)", line)

    def policy(self) -> TurnPolicy:
        """The rule each turn is chosen by, over the calibration files as they are now."""
        prior = self._runtime.config.debate.prior
        teams = [
            TeamView(step.name, step.live.current().ends(prior if k == 0 else None), self._cost_of(k))
            for k, step in enumerate(self._steps())
        ]
        key = tuple(id(m) for t in teams for m in ends_of(t.ends))
        if key != self._cache_key:
            # reach depends on the files: a new fit starts a new cache
            self._cache_key, self._reach = key, {}
        return TurnPolicy(teams, self._chain, self._threshold, self._limit, LOOKAHEAD, self._reach)

    def _team_prices(self, k: int) -> dict[str, Price | None]:
        config, runtime = self._runtime.config, self._runtime
        identities = runtime.identities(runtime.cascade[k - 1] if k else None)
        prices: dict[str, Price | None] = {}
        for role in self._chain.spec.all_roles():
            model = config.model_for(role) if k == 0 else config.debate.cascade[k - 1].model_for(role, config.model)
            prices[role] = price_for(model, embedded=runtime.embedded, name=identities[role].name)
        return prices

    def _cost_of(self, k: int) -> Callable[[str], float]:
        return lambda role: self._cost(k, role)

    def _cost(self, k: int, role: str) -> float:
        """One turn of `role` by team `k`: its model's price at the run's mean tokens per turn of the role, in
        dollars; in calls when some team's model has no price."""
        calls = self._steps()[k].live.current().calls_per_turn
        if self.unit() == "calls":
            return calls
        price = self._prices[k][role]
        assert price is not None
        tokens_in, tokens_out, _ = self._tokens.get(role, (*TURN_TOKENS, 0))
        return calls * max((tokens_in * price.input + tokens_out * price.output) / 1e6, 1e-12)

    def unit(self) -> Literal["usd", "calls"]:
        """What a turn's cost is counted in: dollars when every team's every model has a price, else calls."""
        return "calls" if any(p is None for team in self._prices for p in team.values()) else "usd"

    def _learn(self, records: Sequence[TurnRecord]) -> None:
        """Keep each role's mean tokens per call (what a turn is priced at)."""
        turn = records[-1].turn
        usage = turn.call.usage
        tokens_in, tokens_out, n = self._tokens.get(turn.role, (0.0, 0.0, 0))
        calls = max(usage.llm_calls, 1)
        if usage.prompt_tokens + usage.completion_tokens:
            self._tokens[turn.role] = (
                (tokens_in * n + usage.prompt_tokens / calls) / (n + 1),
                (tokens_out * n + usage.completion_tokens / calls) / (n + 1),
                n + 1,
            )

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> tuple[DebateResult, float | None]:
        """The claim's debate, turn by turn; its P(factual) at each calibration's fitted share."""
        steps = self._steps()
        prior = self._runtime.config.debate.prior
        points = TurnPolicy(
            [TeamView(s.name, s.live.current().model(prior if k == 0 else None), _free) for k, s in enumerate(steps)],
            self._chain,
            self._threshold,
            self._limit,
            LOOKAHEAD,
        )
        result, records, spoken = NO_TURNS, list[TurnRecord](), list[Spoken]()
        choices: list[TurnChoice] = []
        while True:
            policy = self.policy()
            decision = policy.decide(spoken)
            if decision.team is None or result.failure is not None:
                break
            choices.append(self._choice(decision, policy, spoken))
            result = await self._one_turn(steps[decision.team], claim, evidence, result, policy, spoken, decision.team)
            records = result_records(result, self._chain)
            contexts = turn_contexts(self._chain, records)
            if len(contexts) < len(records) or result.failure is not None:
                break
            spoken.append((decision.team, contexts[-1]))
            self._learn(records)
        if decision.team is None and decision.stop != "posterior" and decision.stop != "max_rounds":
            choices.append(_stopped(len(spoken), decision))
        final = governed_result(transcript_result(records), decision.value, self._threshold) if records else result
        if records and decision.stop is not None and result.failure is None:
            final = final.model_copy(update={"stop_reason": decision.stop})
        p, _ = points.read(spoken)
        parts = []
        for i, (k, first) in enumerate(policy.segments(spoken)):
            end = len(spoken) if i + 1 == len(policy.segments(spoken)) else policy.segments(spoken)[i + 1][1]
            said, _ = points.read(spoken[:end])
            parts.append(team_part(steps[k].name, first, records[:end], said, steps[k].live, None))
        return final.model_copy(update={"teams": parts, "choices": choices}), p

    def _choice(self, decision: Decision, policy: TurnPolicy, spoken: Sequence[Spoken]) -> TurnChoice:
        assert decision.team is not None and decision.worth is not None
        unit = self.unit()
        per = "per dollar" if unit == "usd" else "per call"
        names = [t.name for t in policy.teams]
        others = [f"{names[k]}: {w.ratio:.3g} {per} over {w.depth}" for k, w in decision.options if k != decision.team]
        worth, value = decision.worth, decision.value
        error = 0.5 if value is None else min(value, 1 - value)
        why = (
            f"{names[decision.team]}: expected error {error:.4f} -> {worth.error_after:.4f} over {worth.depth} "
            f"turn{'s' * (worth.depth > 1)} at {worth.cost:.3g} {unit}, {worth.ratio:.3g} {per}"
        )
        if others or decision.passed:
            why += "; passed over: " + "; ".join([*others, *decision.passed])
        position = position_of(self._chain, [c.verdict for _, c in spoken])
        return TurnChoice(
            turn=len(spoken),
            team=names[decision.team],
            role=next_context(self._chain, position)[0],
            p_factual=value,
            error=min(error, 0.5),
            expected_error=min(max(worth.error_after, 0.0), 0.5),
            depth=worth.depth,
            cost=max(worth.cost, 0.0),
            unit=unit,
            why=why,
        )

    async def _one_turn(
        self,
        step: Step,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        policy: TurnPolicy,
        spoken: Sequence[Spoken],
        team: int,
    ) -> DebateResult:
        made = self._continuing(step, self._limit)
        before = len(spoken)
        return await made.continue_debate(
            claim,
            evidence,
            earlier,
            governor=_PolicyGovernor(policy, [k for k, _ in spoken] + [team]),
            threshold=self._threshold,
            max_rounds=self._limit,
            until=lambda so_far: "one turn taken" if len(so_far) > before else None,
        )


@dataclasses.dataclass(frozen=True)
class _PolicyGovernor:
    """The stop's P(factual) over turns whose teams are known (what a team's own stop conditions read)."""

    policy: TurnPolicy
    teams: Sequence[int]

    def p_factual(self, turns: Sequence[TurnContext]) -> float | None:
        return self.policy.read(list(zip(self.teams, turns, strict=False)))[0]

    def p_debate(self, chain: Chain, records: Sequence[TurnRecord]) -> float | None:
        contexts = turn_contexts(chain, records)
        return self.p_factual(contexts) if records and len(contexts) == len(records) else None


def voi_limit(config: VerifierConfig) -> int:
    """The round a voi debate ends at: the run's max_rounds and every cascade team's, added (as the cascade's)."""
    return config.debate.max_rounds + sum(step.max_rounds for step in config.debate.cascade)


def _free(role: str) -> float:
    return 1.0


def _stopped(turns: int, decision: Decision) -> TurnChoice:
    value = decision.value
    error = 0.5 if value is None else min(value, 1 - value)
    why = {"unseen": "stopped: no team's fit saw the next turn", "out_of_reach": "stopped: no team can reach"}
    return TurnChoice(
        turn=turns,
        team=None,
        p_factual=value,
        error=min(error, 0.5),
        why=f"{why.get(decision.stop or '', 'stopped')}: " + "; ".join(decision.passed),
    )
