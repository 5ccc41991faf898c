"""The paper's chain (S0 = initial agent; S1 = Trust -> Skeptic -> Leader; S2 = Skeptic -> Trust -> Leader) under
each of its four transition rules (Table 4), registered in `debate.plugins.CHAINS` when the engine is imported."""

from __future__ import annotations

from debate.plugins import CHAINS
from debate.types import ChainSpec

__all__ = ["PAPER_TRANSITION_RULES"]


def _paper(name: str, true_to: str, false_to: str, description: str) -> ChainSpec:
    debate_states = {"S1": ["trust", "skeptic", "leader"], "S2": ["skeptic", "trust", "leader"]}
    # An always-* rule never visits the other state: it is left out, so every state of a spec is reachable.
    used = {s: roles for s, roles in debate_states.items() if s in (true_to, false_to)}
    return ChainSpec(
        name=name,
        description=description,
        initial="S0",
        states={"S0": ["initial"], **used},
        transitions={"*": {"true": true_to, "false": false_to}},
    )


_PAPER_RULES = (
    ("true-to-skeptic", "S2", "S1", "the paper's rule (Table 4): true -> S2 (Skeptic first), false -> S1"),
    ("true-to-trust", "S1", "S2", "true -> S1 (Trust first), false -> S2"),
    ("always-skeptic", "S2", "S2", "every round is S2 (Skeptic first)"),
    ("always-trust", "S1", "S1", "every round is S1 (Trust first)"),
)
for _name, _t, _f, _d in _PAPER_RULES:
    CHAINS.register(_name, _paper(_name, _t, _f, _d), description=_d)
PAPER_TRANSITION_RULES: tuple[str, ...] = tuple(rule[0] for rule in _PAPER_RULES)
"""The four transition rules of the paper's Table 4, in its order (the first is the default)."""
