"""Runs the Markov chain for one claim and records every state and turn."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from debate.chain import MarkovChain
from debate.termination import Progress, TerminationRule
from debate.types import Claim, DebateResult, Evidence, Opinion, Role, StateName, StateRecord, StopReason, Turn, Usage

__all__ = ["AgentTeam", "PriorOpinion", "TurnRequest", "run_debate"]


class PriorOpinion(BaseModel):
    """An earlier opinion an agent is shown (paper Table 12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    """Who gave it."""
    opinion: Opinion
    """What they said."""


class TurnRequest(BaseModel):
    """Everything one agent needs for one turn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    """Who speaks."""
    state: StateName
    """The state being run."""
    round: int
    """0 for S0, else the debate round."""
    claim: Claim
    """The claim under debate."""
    evidence: list[Evidence]
    """The evidence."""
    previous: list[PriorOpinion]
    """Previous state's final opinion (first speaker), the first speaker's (second), both in order (leader)."""


class AgentTeam(Protocol):
    """The agents of one claim's debate. A new team per claim: no agent state crosses claims."""

    async def speak(self, request: TurnRequest) -> Turn:
        """One turn. Returns a failed Turn (error set) when no usable opinion was obtained."""
        ...


def _state_record(name: StateName, round_: int, turns: list[Turn]) -> StateRecord:
    verdicts = {t.factuality for t in turns}
    failed = any(t.error is not None for t in turns)
    return StateRecord(name=name, round=round_, turns=turns, consensus=None if failed else len(verdicts) == 1)


def _finish(
    states: list[StateRecord], *, rounds: int, stop_reason: StopReason, final: Opinion | None, failure: str | None
) -> DebateResult:
    last_round = states[-1] if rounds > 0 else None
    return DebateResult(
        rounds=rounds,
        consensus=last_round.consensus if last_round is not None else None,
        stop_reason=stop_reason,
        states=states,
        final=final,
        failure=failure,
        usage=Usage.total(t.call.usage for s in states for t in s.turns),
    )


async def run_debate(
    *, claim: Claim, evidence: list[Evidence], team: AgentTeam, chain: MarkovChain, termination: TerminationRule
) -> DebateResult:
    """S0 first; then each round's state is picked from the previous verdict until the termination rule fires."""

    def request(role: Role, state: StateName, round_: int, previous: list[PriorOpinion]) -> TurnRequest:
        return TurnRequest(role=role, state=state, round=round_, claim=claim, evidence=evidence, previous=previous)

    initial = await team.speak(request("initial", "S0", 0, []))
    states = [_state_record("S0", 0, [initial])]
    opinion = initial.as_opinion()
    if opinion is None:
        return _finish(states, rounds=0, stop_reason="failed", final=None, failure=f"initial agent: {initial.error}")

    carried = PriorOpinion(role="initial", opinion=opinion)
    rounds, consensus = 0, True
    while not termination.should_stop(Progress(rounds=rounds, consensus=consensus)):
        rounds += 1
        state = chain.next_state(states[-1].name, carried.opinion.factuality)
        turns: list[Turn] = []
        spoken: list[PriorOpinion] = []
        for position, role in enumerate(chain.roles(state)):
            previous = [carried] if position == 0 else list(spoken)
            turn = await team.speak(request(role, state, rounds, previous))
            turns.append(turn)
            said = turn.as_opinion()
            if said is None:
                states.append(_state_record(state, rounds, turns))
                return _finish(
                    states,
                    rounds=rounds,
                    stop_reason="failed",
                    final=None,
                    failure=f"round {rounds} {role}: {turn.error}",
                )
            spoken.append(PriorOpinion(role=role, opinion=said))
        record = _state_record(state, rounds, turns)
        states.append(record)
        consensus = bool(record.consensus)
        carried = spoken[-1]

    if rounds == 0:
        return _finish(states, rounds=0, stop_reason="no_debate", final=carried.opinion, failure=None)
    # A chain that stops without agreement can only have hit the round limit.
    stop_reason: StopReason = "consensus" if consensus else "max_rounds"
    return _finish(states, rounds=rounds, stop_reason=stop_reason, final=carried.opinion, failure=None)
