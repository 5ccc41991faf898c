"""Who speaks next and what each speaker is shown (paper Table 12), as pure logic over the turns so far; the agent
team (agents/) runs it. And what a transcript comes to: its states, its stop reason, why the chain moved."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from debate.plugins import Chain
from debate.types import DebateResult, Failure, Opinion, Role, StateName, StateRecord, StopReason, Turn, Usage

__all__ = ["ChainDriver", "PriorOpinion", "TurnPlan", "TurnRecord", "explain_moves", "transcript_result"]


class PriorOpinion(BaseModel):
    """An earlier opinion an agent is shown (paper Table 12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    """Who gave it."""
    title: str
    """How the prompts name that agent."""
    opinion: Opinion
    """What they said."""


class TurnPlan(BaseModel):
    """Who speaks next and what they are shown."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    """Who speaks."""
    state: StateName
    """The state being run."""
    round: int = Field(ge=0)
    """0 for the initial state, else the debate round."""
    position: int = Field(ge=0)
    """Index of the speaker within its state."""
    last_in_state: bool
    """Whether the state ends with this turn."""
    previous: list[PriorOpinion]
    """The opinions this speaker is shown, in order."""


class TurnRecord(BaseModel):
    """One turn of the chain: where it was and what was said (the agent team's messages carry these)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: StateName
    """The state it belongs to."""
    round: int = Field(ge=0)
    """0 for the initial state, else the debate round."""
    position: int = Field(ge=0)
    """The speaker's index in its state."""
    last_in_state: bool = False
    """Whether the state ended with it."""
    turn: Turn
    """What the agent said (or why it could not)."""


class ChainDriver:
    """Pure chain logic over the turns so far: the next speaker and its inputs, and the result."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.spec = chain.spec

    def _prior(self, record: TurnRecord) -> PriorOpinion:
        opinion = record.turn.as_opinion()
        assert opinion is not None  # a failed turn ends the chain before anyone else speaks
        return PriorOpinion(role=record.turn.role, title=self.spec.role(record.turn.role).title, opinion=opinion)

    def next_turn(self, history: Sequence[TurnRecord]) -> TurnPlan:
        """The next turn after `history` (the caller decides whether the chain stops first)."""
        if not history:
            state, round_, position = self.spec.initial, 0, 0
        else:
            last = history[-1]
            if last.position + 1 < len(self.chain.roles(last.state)):
                state, round_, position = last.state, last.round, last.position + 1
            else:
                verdict = last.turn.factuality
                assert verdict is not None
                state, round_, position = self.chain.next_state(last.state, verdict), last.round + 1, 0
        roles = self.chain.roles(state)
        role = roles[position]
        sees = self.spec.role(role).sees
        this_state = [r for r in history if r.round == round_ and r.state == state] if history else []
        if sees == "nothing" or not history:
            previous: list[PriorOpinion] = []
        elif position == 0:
            previous = [self._prior(history[-1])]
        elif sees == "previous":
            previous = [self._prior(this_state[-1])]
        else:
            previous = [self._prior(r) for r in this_state]
        return TurnPlan(
            role=role,
            state=state,
            round=round_,
            position=position,
            last_in_state=position == len(roles) - 1,
            previous=previous,
        )


def _state_record(records: list[TurnRecord]) -> StateRecord:
    turns = [r.turn for r in records]
    failed = any(t.error is not None for t in turns)
    verdicts = {t.factuality for t in turns}
    return StateRecord(
        name=records[0].state, round=records[0].round, turns=turns, consensus=None if failed else len(verdicts) == 1
    )


def transcript_result(records: Sequence[TurnRecord]) -> DebateResult:
    """The DebateResult of a transcript: states grouped in order; the stop reason follows from the last state (a
    failed turn, no debate round, consensus, or else the round limit)."""
    groups: list[list[TurnRecord]] = []
    for record in records:
        if groups and (groups[-1][0].round, groups[-1][0].state) == (record.round, record.state):
            groups[-1].append(record)
        else:
            groups.append([record])
    states = [_state_record(group) for group in groups]
    usage = Usage.total(r.turn.call.usage for r in records)
    rounds = records[-1].round if records else 0
    failed = next((r for r in records if r.turn.error is not None), None)
    if failed is not None or not records:
        if failed is not None and failed.turn.failure is not None:
            where = "initial agent" if failed.round == 0 else f"round {failed.round} {failed.turn.role}"
            failure = failed.turn.failure.model_copy(update={"message": f"{where}: {failed.turn.failure.message}"})
        else:
            failure = Failure(kind="reply_unusable", message="the debate produced no turn", stage="debate")
        return DebateResult(
            rounds=rounds,
            consensus=None,
            stop_reason="failed",
            states=states,
            final=None,
            failure=failure,
            usage=usage,
        )
    last_round = states[-1] if rounds > 0 else None
    consensus = last_round.consensus if last_round is not None else None
    stop_reason: StopReason = "no_debate" if rounds == 0 else ("consensus" if consensus else "max_rounds")
    return DebateResult(
        rounds=rounds,
        consensus=consensus,
        stop_reason=stop_reason,
        states=states,
        final=records[-1].turn.as_opinion(),
        failure=None,
        usage=usage,
    )


def explain_moves(result: DebateResult, chain: Chain | None) -> list[str | None]:
    """Why the chain left each visited state, one entry per state (None for the last): the verdict of the state's
    last agent that gave one and the state it led to, e.g. "leader said false -> S1". When `chain` is given and
    its rule would have chosen another state (a chain file changed since), that is said too."""
    moves: list[str | None] = []
    for here, there in zip(result.states, result.states[1:], strict=False):
        last = next((t for t in reversed(here.turns) if t.factuality is not None), None)
        if last is None:
            moves.append(f"no verdict in {here.name} -> {there.name}")
            continue
        said = "true" if last.factuality else "false"
        expected = chain.next_state(here.name, bool(last.factuality)) if chain is not None else there.name
        mark = "" if expected == there.name else f" (the rule says {expected})"
        moves.append(f"{last.role} said {said} -> {there.name}{mark}")
    return [*moves, None] if result.states else []
