"""How the agents are taken to behave when a run is estimated before it runs: assumed (they keep the verdict they
are shown at `--agreement`) or fitted from a pilot's transcripts (`--estimate-from RESULTS`: for each class of claim
by its initial verdict, each role's rate of saying true after each verdict it is shown), and the turns per claim the
chain then takes (debate.engine's exact expectation; the range from every state agreeing at min_rounds to none
before max_rounds). debate.pipeline._estimate turns these into calls, tokens and cost."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from debate.engine import MarkovChain, outcome
from debate.errors import UsageError
from debate.pipeline._range import Range
from debate.types import DebateResult, Report

__all__ = ["Behaviour", "assumed_behaviour", "debate_turns", "fitted_behaviour"]

_ASSUMED_REPLY_TOKENS = 80.0
"""A debate turn's reply (a short opinion in JSON) when no pilot says otherwise."""
_OPINION_CHARS = 300.0
"""One shown opinion, rendered, when no pilot says otherwise."""


@dataclass(frozen=True)
class Behaviour:
    """How the agents are assumed to behave, and where that comes from."""

    source: str
    """Said on the estimate's line: assumed, or fitted from which run."""
    initial_true: float
    """P(the initial agent says true)."""
    rates: dict[tuple[bool, str, bool | None], float]
    """(initial verdict, role, last verdict shown or None) -> P(says true); missing keys fall back to agreement."""
    agreement: float
    """P(keeping the verdict shown) where no rate was fitted."""
    calls_per_turn: float = 1.0
    """Model calls per debate turn (re-asks of unusable replies included)."""
    output_tokens: float = _ASSUMED_REPLY_TOKENS
    """Completion tokens per debate call."""
    opinion_chars: float = _OPINION_CHARS
    """Characters of one rendered opinion shown to a later speaker."""


def assumed_behaviour(agreement: float, initial_true: float = 0.5) -> Behaviour:
    """Agents that keep the verdict they are shown with probability `agreement`."""
    return Behaviour(
        source=f"assumed: agents keep the verdict they are shown {agreement:.0%} of the time (--agreement; fit it "
        "from a pilot with --estimate-from RESULTS)",
        initial_true=initial_true,
        rates={},
        agreement=agreement,
    )


class _Counts:
    def __init__(self) -> None:
        self.said: dict[tuple[bool, str, bool | None], list[int]] = defaultdict(lambda: [0, 0])
        self.initial = [0, 0]
        self.turns = self.calls = self.completion = self.opinion_chars = self.opinions = 0

    def debate(self, result: DebateResult, chain: MarkovChain) -> None:
        verdicts = [t.factuality for s in result.states for t in s.turns]
        if not verdicts or any(v is None for v in verdicts):
            return  # a failed turn ends the record of what the agents do
        initial = bool(verdicts[0])
        self.initial[initial] += 1
        entering: bool | None = None
        for state in result.states:
            last = entering
            for position, turn in enumerate(state.turns):
                self.turns += 1
                self.calls += turn.call.attempts
                self.completion += turn.call.usage.completion_tokens
                self.opinion_chars += len(turn.opinion or "")
                self.opinions += 1
                sees = chain.spec.role(turn.role).sees if turn.role in chain.spec.all_roles() else "previous"
                shown = None if sees == "nothing" or (position == 0 and entering is None) else last
                if result.states[0] is not state:  # the initial verdict is the class, not a rate
                    self.said[(initial, turn.role, shown)][bool(turn.factuality)] += 1
                last = bool(turn.factuality)
            entering = last


def fitted_behaviour(reports: Iterable[Report], chain: MarkovChain, *, source: str, agreement: float) -> Behaviour:
    """Role rates counted from a pilot run's transcripts (`agreement` where a context was never seen)."""
    counts = _Counts()
    for report in reports:
        for claim in report.claims:
            if claim.debate is not None:
                counts.debate(claim.debate, chain)
    debates = sum(counts.initial)
    if debates == 0:
        raise UsageError(f"{source} has no finished debate to fit the agents' behaviour from")
    rates = {key: said[1] / (said[0] + said[1]) for key, said in counts.said.items()}
    return Behaviour(
        source=f"fitted from {source} ({debates} debates, {counts.turns} turns)",
        initial_true=counts.initial[1] / debates,
        rates=rates,
        agreement=agreement,
        calls_per_turn=counts.calls / max(1, counts.turns),
        output_tokens=counts.completion / max(1, counts.calls) or _ASSUMED_REPLY_TOKENS,
        opinion_chars=counts.opinion_chars / max(1, counts.opinions) or _OPINION_CHARS,
    )


@dataclass(frozen=True)
class _ClassModel:
    """The behaviour of one class of claim (by its initial verdict), as debate.engine._expectation's RoleModel."""

    behaviour: Behaviour
    initial: bool
    initial_role: str

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        if role == self.initial_role and not shown:
            return 1.0 if self.initial else 0.0
        last = shown[-1] if shown else None
        fitted = self.behaviour.rates.get((self.initial, role, last))
        if fitted is not None:
            return fitted
        keep = self.behaviour.agreement
        anchor = self.initial if last is None else last
        return keep if anchor else 1.0 - keep


@dataclass(frozen=True)
class _Fixed:
    """Agents that always keep (agree=True) or always flip the verdict they are shown: the range's two ends."""

    agree: bool

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        last = shown[-1] if shown else True
        return float(last == self.agree)


def debate_turns(behaviour: Behaviour, chain: MarkovChain, min_rounds: int, max_rounds: int) -> Range:
    """Turns per debated claim: expected under `behaviour`, and the chain's least and most."""
    expected = 0.0
    for initial, weight in ((True, behaviour.initial_true), (False, 1.0 - behaviour.initial_true)):
        if weight > 0:
            model = _ClassModel(behaviour, initial, chain.roles(chain.spec.initial)[0])
            expected += weight * outcome(model, chain, min_rounds=min_rounds, max_rounds=max_rounds, label=True).turns
    ends = [
        outcome(_Fixed(a), chain, min_rounds=min_rounds, max_rounds=max_rounds, label=True).turns for a in (True, False)
    ]
    return Range(expected=expected, low=min(ends), high=max(ends))
