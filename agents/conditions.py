"""The debate's stop rules as autogen `TerminationCondition`s, composed with `&` and `|`. The paper's:
`AtStateEnd((RoundsCompleted(min) & Consensus()) | RoundsCompleted(max)) | TurnFailed()`; the posterior stop:
`PosteriorDecided(...) | AtStateEnd(RoundsCompleted(max)) | TurnFailed()`. `AtStateEnd` evaluates its
condition once per finished state, on that state's turns, and resets it otherwise, so `&` means "both hold for this
state" rather than autogen's "both have held at some point". Like autogen's own conditions, a fired condition refuses
to run again until it is reset."""

from __future__ import annotations

from collections.abc import Sequence

from autogen_agentchat.base import TerminatedException, TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage, StructuredMessage

from debate.engine import Governor, StopCheck, TurnRecord, turn_contexts
from debate.plugins import Chain

__all__ = [
    "AtStateEnd",
    "Checked",
    "Consensus",
    "PosteriorDecided",
    "RoundsCompleted",
    "TurnFailed",
    "paper_termination",
    "posterior_termination",
    "turns_in",
]


def turns_in(messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> list[TurnRecord]:
    """The chain turns among a thread's messages, in order."""
    return [m.content for m in messages if isinstance(m, StructuredMessage) and isinstance(m.content, TurnRecord)]


class _Condition(TerminationCondition):
    def __init__(self) -> None:
        self._terminated = False

    @property
    def terminated(self) -> bool:
        return self._terminated

    async def reset(self) -> None:
        self._terminated = False

    def _check_not_fired(self) -> None:
        # As autogen's own conditions do: a fired condition must be reset before it is asked again.
        if self._terminated:
            raise TerminatedException(f"{type(self).__name__} has already fired; reset it first")

    def _stop(self, content: str) -> StopMessage:
        self._terminated = True
        return StopMessage(content=content, source=type(self).__name__)


class RoundsCompleted(_Condition):
    """Holds once `n` debate rounds are done (the initial state is round 0). Min rounds and max rounds alike."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self._check_not_fired()
        turns = turns_in(messages)
        if turns and turns[-1].last_in_state and turns[-1].round >= self.n:
            return self._stop(f"{turns[-1].round} rounds completed (limit {self.n})")
        return None


class Consensus(_Condition):
    """Holds when every speaker of the state just finished gave the same verdict."""

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self._check_not_fired()
        turns = turns_in(messages)
        if turns and turns[-1].last_in_state:
            verdicts = {t.turn.factuality for t in turns if t.state == turns[-1].state and t.round == turns[-1].round}
            if len(verdicts) == 1 and None not in verdicts:
                return self._stop("the state's speakers agree")
        return None


class TurnFailed(_Condition):
    """Holds as soon as a turn produced no usable opinion: the chain cannot go on without it."""

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self._check_not_fired()
        failed = [t for t in turns_in(messages) if t.turn.error is not None]
        return self._stop(f"{failed[0].turn.role}: {failed[0].turn.error}") if failed else None


class Checked(_Condition):
    """Holds once `check`, asked after every turn with the turns so far, gives a reason (a caller's own stop: the
    cascade's "the threshold is out of this team's reach", the chooser's "one turn taken")."""

    def __init__(self, check: StopCheck) -> None:
        super().__init__()
        self.check = check
        self._records: list[TurnRecord] = []

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self._check_not_fired()
        fresh = turns_in(messages)
        if not fresh:
            return None
        self._records.extend(fresh)
        reason = self.check(self._records)
        return self._stop(reason) if reason is not None else None

    async def reset(self) -> None:
        await super().reset()
        self._records = []


class PosteriorDecided(Checked):
    """Holds once P(factual | the turns so far) under the calibration is at least `threshold` or at most
    1 - `threshold`; checked after every turn."""

    def __init__(self, model: Governor, chain: Chain, threshold: float) -> None:
        super().__init__(self._decided)
        self.model, self.chain, self.threshold = model, chain, threshold

    def _decided(self, records: Sequence[TurnRecord]) -> str | None:
        contexts = turn_contexts(self.chain, records)
        if len(contexts) < len(records):
            return None  # a failed turn: TurnFailed ends the chain
        p = self.model.p_factual(contexts)
        if p is not None and (p >= self.threshold or p <= 1 - self.threshold):
            return f"p_factual {p:.4f} is decided (threshold {self.threshold})"
        return None


class AtStateEnd(_Condition):
    """Evaluates `inner` once per finished state, on that state's turns; resets it when it does not hold."""

    def __init__(self, inner: TerminationCondition) -> None:
        super().__init__()
        self.inner = inner
        self._state: list[BaseAgentEvent | BaseChatMessage] = []

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        self._check_not_fired()
        for message in messages:
            turns = turns_in([message])
            if not turns:
                continue
            self._state.append(message)
            if turns[0].last_in_state:
                state, self._state = self._state, []
                stop = await self.inner(state)
                if stop is not None:
                    return self._stop(stop.content)
                await self.inner.reset()
        return None

    async def reset(self) -> None:
        await super().reset()
        self._state = []
        await self.inner.reset()


def paper_termination(*, min_rounds: int, max_rounds: int) -> TerminationCondition:
    """Stop after a state once min_rounds are done and its speakers agree, or at max_rounds; at once on a failed
    turn."""
    return AtStateEnd((RoundsCompleted(min_rounds) & Consensus()) | RoundsCompleted(max_rounds)) | TurnFailed()


def posterior_termination(model: Governor, chain: Chain, *, threshold: float, max_rounds: int) -> TerminationCondition:
    """Stop after any turn once the posterior is decided, else after the state of round max_rounds; at once on a
    failed turn."""
    return PosteriorDecided(model, chain, threshold) | AtStateEnd(RoundsCompleted(max_rounds)) | TurnFailed()
