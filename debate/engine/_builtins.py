"""The paper's chain (S0 = initial agent; S1 = Trust -> Skeptic -> Leader; S2 = Skeptic -> Trust -> Leader) under
each of its four transition rules (Table 4): entry points of `markov_debate.chains` in the project's pyproject.toml."""

from __future__ import annotations

from debate.types import ChainSpec

__all__ = ["ALWAYS_SKEPTIC", "ALWAYS_TRUST", "PAPER_TRANSITION_RULES", "TRUE_TO_SKEPTIC", "TRUE_TO_TRUST"]


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


TRUE_TO_SKEPTIC = _paper(
    "true-to-skeptic", "S2", "S1", "the paper's rule (Table 4): true -> S2 (Skeptic first), false -> S1"
)
TRUE_TO_TRUST = _paper("true-to-trust", "S1", "S2", "true -> S1 (Trust first), false -> S2")
ALWAYS_SKEPTIC = _paper("always-skeptic", "S2", "S2", "every round is S2 (Skeptic first)")
ALWAYS_TRUST = _paper("always-trust", "S1", "S1", "every round is S1 (Trust first)")
PAPER_TRANSITION_RULES: tuple[str, ...] = tuple(
    spec.name for spec in (TRUE_TO_SKEPTIC, TRUE_TO_TRUST, ALWAYS_SKEPTIC, ALWAYS_TRUST)
)
"""The four transition rules of the paper's Table 4, in its order (the first is the default)."""
