"""The exact expectation of a chain's debate from role behaviour: no Monte Carlo. Used by `debate verify
--estimate` (expected calls per claim) and by `debate dynamics predict` (accuracy and calls under fitted behaviour).

The debate of one claim is an absorbing Markov chain over (state, round, the verdict it entered with); within a
state every sequence of verdicts is enumerated (2^speakers), each with the probability the behaviour gives it. A
state ends the debate when its round reaches min_rounds and its speakers agree, or when its round reaches
max_rounds (the engine's stop rule, agents.conditions); the final verdict is the last speaker's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

from debate.plugins import Chain

__all__ = ["Outcome", "RoleModel", "outcome", "shown_in_state"]


class RoleModel(Protocol):
    """Each role's probability of saying true in a context: what the chain's exact expectation is computed from."""

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        """P(verdict true) for this role in this context."""
        ...


@dataclass(frozen=True)
class Outcome:
    """For one true label: P(final verdict true) and the expected number of turns."""

    p_true: float
    turns: float
    capped: float = 0.0
    """P(the max-rounds cap, not the agents' agreement, ends the debate)."""


def shown_in_state(
    chain: Chain, role: str, position: int, entering: bool | None, seq: tuple[bool, ...]
) -> tuple[bool, ...]:
    """The verdicts the speaker at `position` of a state is shown (the chain driver's rule, over verdicts alone):
    `entering` is the verdict the state was entered with (None in the initial state), `seq` the state's verdicts
    so far."""
    sees = chain.spec.role(role).sees
    if sees == "nothing" or (entering is None and position == 0):
        return ()
    if position == 0:
        return (bool(entering),)
    return seq[-1:] if sees == "previous" else seq


def _state(
    model: RoleModel, chain: Chain, state: str, label: bool, entering: bool | None
) -> list[tuple[float, tuple[bool, ...]]]:
    sequences: list[tuple[float, tuple[bool, ...]]] = [(1.0, ())]
    for position, role in enumerate(chain.roles(state)):
        grown = []
        for prob, seq in sequences:
            p = model.p(role, state, label, shown_in_state(chain, role, position, entering, seq))
            grown += [(prob * p, (*seq, True)), (prob * (1 - p), (*seq, False))]
        sequences = [(p, s) for p, s in grown if p > 0]
    return sequences


def outcome(model: RoleModel, chain: Chain, *, min_rounds: int, max_rounds: int, label: bool) -> Outcome:
    """The exact distribution of the final verdict, and the expected turns, for one true label."""
    frontier: dict[tuple[str, bool | None], float] = {(chain.spec.initial, None): 1.0}
    p_true = turns = capped = 0.0
    for round_ in range(max_rounds + 1):
        following: dict[tuple[str, bool | None], float] = defaultdict(float)
        for (state, entering), weight in frontier.items():
            for q, seq in _state(model, chain, state, label, entering):
                w = weight * q
                turns += w * len(seq)
                agreed = round_ >= min_rounds and len(set(seq)) == 1
                if agreed or round_ >= max_rounds:
                    p_true += w * seq[-1]
                    capped += 0.0 if agreed else w
                else:
                    following[(chain.next_state(state, seq[-1]), seq[-1])] += w
        frontier = following
    return Outcome(p_true=p_true, turns=turns, capped=capped)
