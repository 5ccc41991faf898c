"""Exact prediction of a chain's outcome from role behaviour: no Monte Carlo.

The debate of one claim is an absorbing Markov chain over (state, round, the verdict it entered with); within a
state every sequence of verdicts is enumerated (2^speakers), each with the probability the behaviour gives it. A
state ends the debate when its round reaches min_rounds and its speakers agree, or when its round reaches
max_rounds (the engine's stop rule, agents.conditions); the final verdict is the last speaker's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from debate.chain import MarkovChain, load_chain
from experiments.dynamics.fit import Behaviour, interval, replicates
from experiments.dynamics.observe import Observation

__all__ = ["Outcome", "Predicted", "RoleModel", "Setting", "outcome", "predict"]


class RoleModel(Protocol):
    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        """P(verdict true) for this role in this context."""
        ...


@dataclass(frozen=True)
class Setting:
    chain: str
    min_rounds: int
    max_rounds: int

    def __str__(self) -> str:
        return f"{self.chain} min {self.min_rounds} max {self.max_rounds}"


@dataclass(frozen=True)
class Outcome:
    """For one true label: P(final verdict true) and the expected number of turns."""

    p_true: float
    turns: float


def _state(model: RoleModel, chain: MarkovChain, state: str, label: bool,
           entering: bool | None) -> list[tuple[float, tuple[bool, ...]]]:  # fmt: skip
    sequences: list[tuple[float, tuple[bool, ...]]] = [(1.0, ())]
    for position, role in enumerate(chain.roles(state)):
        sees = chain.spec.role(role).sees
        grown = []
        for prob, seq in sequences:
            if sees == "nothing" or (entering is None and position == 0):
                shown: tuple[bool, ...] = ()
            elif position == 0:
                shown = (bool(entering),)
            else:
                shown = seq[-1:] if sees == "previous" else seq
            p = model.p(role, state, label, shown)
            grown += [(prob * p, (*seq, True)), (prob * (1 - p), (*seq, False))]
        sequences = [(p, s) for p, s in grown if p > 0]
    return sequences


def outcome(model: RoleModel, chain: MarkovChain, *, min_rounds: int, max_rounds: int, label: bool) -> Outcome:
    """The exact distribution of the final verdict, and the expected turns, for one true label."""
    frontier: dict[tuple[str, bool | None], float] = {(chain.spec.initial, None): 1.0}
    p_true = turns = 0.0
    for round_ in range(max_rounds + 1):
        following: dict[tuple[str, bool | None], float] = defaultdict(float)
        for (state, entering), weight in frontier.items():
            for q, seq in _state(model, chain, state, label, entering):
                w = weight * q
                turns += w * len(seq)
                if (round_ >= min_rounds and len(set(seq)) == 1) or round_ >= max_rounds:
                    p_true += w * seq[-1]
                else:
                    following[(chain.next_state(state, seq[-1]), seq[-1])] += w
        frontier = following
    return Outcome(p_true=p_true, turns=turns)


class Predicted(BaseModel):
    """One setting's predicted figures, with bootstrap intervals."""

    model_config = ConfigDict(frozen=True)
    chain: str
    min_rounds: int
    max_rounds: int
    p_true_if_factual: float
    p_true_if_hallucinated: float
    accuracy: float
    accuracy_interval: tuple[float, float]
    f1: float
    f1_interval: tuple[float, float]
    calls_per_claim: float
    calls_interval: tuple[float, float]
    backed_off: list[str]
    """Contexts this setting needs that the fitted run never showed (answered by the stated back-off)."""


def _figures(model: RoleModel, chain: MarkovChain, setting: Setting, share_true: float,
             calls_per_turn: float) -> tuple[float, ...]:  # fmt: skip
    yes = outcome(model, chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds, label=True)
    no = outcome(model, chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds, label=False)
    tp, fn = share_true * yes.p_true, share_true * (1 - yes.p_true)
    fp, tn = (1 - share_true) * no.p_true, (1 - share_true) * (1 - no.p_true)
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    calls = (share_true * yes.turns + (1 - share_true) * no.turns) * calls_per_turn
    return yes.p_true, no.p_true, tp + tn, f1, calls


def predict(seen: Sequence[Observation], settings: Sequence[Setting], *, share_true: float, bootstrap: int = 200,
            seed: int = 0) -> list[Predicted]:  # fmt: skip
    """Predicted accuracy, F1 (factual as the positive class) and calls per claim for each setting, from the
    behaviour fitted to `seen`; `share_true` is the share of factual claims the figures are for."""
    point = Behaviour(seen)
    calls_per_turn = sum(o.calls for o in seen) / len(seen)
    fitted = [(Behaviour(r), sum(o.calls for o in r) / len(r)) for r in replicates(seen, bootstrap, seed)]
    results = []
    for setting in settings:
        chain = load_chain(setting.chain)
        point.backed_off.clear()  # this setting's own back-offs
        yes, no, accuracy, f1, calls = _figures(point, chain, setting, share_true, calls_per_turn)
        spread = [_figures(b, chain, setting, share_true, per_turn) for b, per_turn in fitted]
        results.append(Predicted(
            chain=setting.chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds,
            p_true_if_factual=yes, p_true_if_hallucinated=no, accuracy=accuracy,
            accuracy_interval=interval([s[2] for s in spread] or [accuracy]),
            f1=f1, f1_interval=interval([s[3] for s in spread] or [f1]),
            calls_per_claim=calls, calls_interval=interval([s[4] for s in spread] or [calls]),
            backed_off=sorted(point.backed_off),
        ))  # fmt: skip
    return results
