"""A chain spec built into a networkx graph and validated when built (roles, reachable states, a next state for
every verdict), and the loader: a registered chain by name, or a spec file (TOML or JSON)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from debate.errors import ChainError, InputError, UsageError, validation_problem
from debate.files import load_json, load_toml, read_text_file
from debate.plugins import CHAINS
from debate.types import BUILTIN_ROLES, ChainSpec

__all__ = ["MarkovChain", "load_chain"]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for a path, or holding NUL, names no file
        return False


def load_chain(name_or_path: str) -> MarkovChain:
    """A registered chain by name, or a chain spec file (TOML, or JSON with the same fields)."""
    path = Path(name_or_path)
    if name_or_path in CHAINS:
        found = CHAINS.get(name_or_path)
        return MarkovChain(found() if callable(found) else found)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        raise ChainError(f"chain file {path}: YAML is not read; write the chain spec as TOML or JSON")
    if not (suffix in (".toml", ".json") or _is_file(path)):
        raise ChainError(CHAINS.unknown(name_or_path) + " (or give a chain spec file)")
    try:
        text = read_text_file(path, "chain file")
        raw: Any = load_json(text, f"chain file {path}") if suffix == ".json" else load_toml(text, f"chain file {path}")
    except InputError as exc:
        raise ChainError(str(exc)) from exc
    if not isinstance(raw, dict):
        raise ChainError(f"chain file {path}: expected an object of chain fields, got {type(raw).__name__}")
    try:
        spec = ChainSpec.model_validate({**raw, "source": str(path.resolve())})
    except ValidationError as exc:
        raise ChainError(f"chain file {path}: {validation_problem(exc, '(file)')}") from exc
    except RecursionError as exc:
        raise ChainError(f"chain file {path}: nested too deeply to read") from exc
    return MarkovChain(spec)


class MarkovChain:
    """A validated chain spec and its graph: states are nodes (attribute `roles`), each with one out-edge per
    verdict (edge key True/False)."""

    def __init__(self, spec: ChainSpec) -> None:
        # networkx takes a quarter of a second to import: paid when a chain is built, not when the engine is named.
        import networkx as nx

        self.spec = spec
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph(name=spec.name)
        for state, roles in spec.states.items():
            self.graph.add_node(state, roles=tuple(roles), initial=state == spec.initial)
        self._validate()

    @property
    def name(self) -> str:
        return self.spec.name

    def _validate(self) -> None:
        where = f"chain {self.spec.name!r}"
        self._check_states(where)
        self._add_transitions(where)
        spec = self.spec
        import networkx as nx

        reachable = nx.descendants(self.graph, spec.initial) | {spec.initial}
        unreachable = sorted(set(spec.states) - reachable)
        if unreachable:
            raise ChainError(f"{where}: state(s) {unreachable} cannot be reached from {spec.initial}")
        if len(spec.states) < 2:
            raise ChainError(f"{where}: a chain needs the initial state and at least one debate state")

    def _check_states(self, where: str) -> None:
        spec = self.spec
        if spec.initial not in spec.states:
            raise ChainError(f"{where}: the initial state {spec.initial!r} is not among the states {list(spec.states)}")
        for state, roles in spec.states.items():
            if not roles:
                raise ChainError(f"{where}: state {state} has no speakers")
            for role in roles:
                if role not in spec.roles and role not in BUILTIN_ROLES:
                    raise ChainError(
                        f"{where}: state {state} names unknown role {role!r}; define it under [roles.{role}] "
                        f"(known: {', '.join(sorted({*BUILTIN_ROLES, *spec.roles}))})"
                    )
            if state != spec.initial and any(spec.role(r).sees == "nothing" for r in roles):
                raise ChainError(f"{where}: state {state}: a debate role must see earlier opinions, not `nothing`")

    def _add_transitions(self, where: str) -> None:
        spec = self.spec
        unknown = [s for s in spec.transitions if s != "*" and s not in spec.states]
        if unknown:
            raise ChainError(f"{where}: transitions from unknown state(s) {unknown}")
        for state in spec.states:
            table = spec.transitions.get(state) or spec.transitions.get("*")
            if table is None:
                raise ChainError(f"{where}: state {state} has no transitions (give [transitions.{state}] or `*`)")
            for verdict in ("true", "false"):
                target = table.get(verdict)
                if target is None:
                    raise ChainError(f"{where}: state {state} gives no next state for verdict {verdict}")
                if target not in spec.states:
                    raise ChainError(f"{where}: state {state} on {verdict} leads to unknown state {target!r}")
                if target == spec.initial:
                    raise ChainError(f"{where}: no transition may lead back to the initial state {spec.initial}")
                self.graph.add_edge(state, target, key=verdict == "true")

    def check_roles(self, named: Iterable[tuple[str, str]]) -> None:
        """Refuse a role given a model (`named`: each as (where it was given, the role)) that this chain has not:
        a misspelt role would start and be ignored, its turns on another model than the one meant.

        Raises:
            UsageError: naming where the role was given, and the chain's roles.
        """
        known = self.spec.all_roles()
        for where, role in named:
            if role not in known:
                raise UsageError(
                    f"{where}: the chain {self.spec.name!r} has no role {role!r}; its roles: {', '.join(known)}"
                )

    def roles(self, state: str) -> tuple[str, ...]:
        roles: tuple[str, ...] = self.graph.nodes[state]["roles"]
        return roles

    def next_state(self, current: str, verdict: bool) -> str:
        for _, target, key in self.graph.out_edges(current, keys=True):
            if key is verdict:
                return str(target)
        raise ChainError(f"no transition from {current} on {verdict}")  # unreachable after validation

    def to_dict(self) -> dict[str, Any]:
        """Node and edge lists, for drawing (the audit UI) and for the report."""
        return {
            "name": self.spec.name,
            "initial": self.spec.initial,
            "nodes": [
                {"id": s, "roles": list(self.roles(s)), "initial": s == self.spec.initial} for s in self.spec.states
            ],
            "edges": [
                {"source": u, "target": v, "verdict": bool(k)}
                for u, v, k in sorted(self.graph.edges(keys=True), key=lambda e: (e[0], not e[2]))
            ],
        }
