"""The Markov chain as data: states and verdict-labelled transitions in a networkx graph, validated when built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx

from debate.config import TransitionRule
from debate.types import Role, StateName

__all__ = ["DEBATE_STATES", "TRANSITION_RULES", "ChainError", "MarkovChain"]

DEBATE_STATES: dict[StateName, tuple[Role, ...]] = {
    "S0": ("initial",),
    "S1": ("trust", "skeptic", "leader"),
    "S2": ("skeptic", "trust", "leader"),
}
"""Speaking order of each state (paper Figure 2)."""

TRANSITION_RULES: dict[TransitionRule, dict[bool, StateName]] = {
    "true-to-skeptic": {True: "S2", False: "S1"},
    "true-to-trust": {True: "S1", False: "S2"},
    "always-skeptic": {True: "S2", False: "S2"},
    "always-trust": {True: "S1", False: "S1"},
}
"""Previous verdict -> next state. The paper's rule is true-to-skeptic (Table 4)."""


class ChainError(ValueError):
    """The chain definition is inconsistent."""


class MarkovChain:
    """States are nodes (attribute `roles`); each node has one out-edge per verdict (edge key True/False)."""

    def __init__(self, graph: nx.MultiDiGraph, *, rule: str) -> None:
        self.graph = graph
        self.rule = rule
        self._validate()

    @classmethod
    def build(
        cls,
        transition: TransitionRule | Mapping[bool, StateName] = "true-to-skeptic",
        *,
        states: Mapping[StateName, Sequence[Role]] = DEBATE_STATES,
    ) -> MarkovChain:
        """Build from a named rule or an explicit {verdict: state} mapping."""
        if isinstance(transition, str):
            if transition not in TRANSITION_RULES:
                raise ChainError(f"unknown transition rule {transition!r}; choose one of {sorted(TRANSITION_RULES)}")
            targets, name = TRANSITION_RULES[transition], str(transition)
        else:
            targets, name = dict(transition), "custom"
        graph = nx.MultiDiGraph()
        for state, roles in states.items():
            graph.add_node(state, roles=tuple(roles))
        for state in states:
            for verdict in (True, False):
                if verdict not in targets:
                    raise ChainError(f"transition rule {name!r} gives no next state for verdict {verdict}")
                graph.add_edge(state, targets[verdict], key=verdict)
        return cls(graph, rule=name)

    def _validate(self) -> None:
        g = self.graph
        if "S0" not in g or g.nodes["S0"].get("roles") != ("initial",):
            raise ChainError("the chain needs the initial state S0 spoken by the initial agent alone")
        if g.in_degree("S0") != 0:
            raise ChainError("no transition may lead back to S0")
        for state, roles in g.nodes(data="roles"):
            if state == "S0":
                continue
            if roles is None or len(roles) != 3 or roles[-1] != "leader" or set(roles[:2]) != {"trust", "skeptic"}:
                raise ChainError(f"state {state}: a debate state is trust and skeptic in some order, then leader")
        for state in g.nodes:
            keys = sorted(k for _, _, k in g.out_edges(state, keys=True))
            if keys != [False, True]:
                raise ChainError(f"state {state} needs exactly one transition per verdict, has {keys}")

    def roles(self, state: StateName) -> tuple[Role, ...]:
        roles: tuple[Role, ...] = self.graph.nodes[state]["roles"]
        return roles

    def next_state(self, current: StateName, verdict: bool) -> StateName:
        for _, target, key in self.graph.out_edges(current, keys=True):
            if key is verdict:
                state: StateName = target
                return state
        raise ChainError(f"no transition from {current} on {verdict}")  # unreachable after validation
