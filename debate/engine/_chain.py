"""The Markov chain as data: a spec (states with their ordered roles, the initial state, a transition table from
the previous verdict to the next state) built into a networkx graph and validated when built.

The paper's chain (S0 = initial agent; S1 = Trust -> Skeptic -> Leader; S2 = Skeptic -> Trust -> Leader) with its
four transition rules are built-in specs; a user loads others from TOML files (`--chain FILE`), for example a state
with a fourth role that has its own prompt file. `ChainDriver` is the pure logic of who speaks next and what each
speaker is shown (paper Table 12); the agent team (agents/) runs it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.errors import UsageError, validation_problem
from debate.plugins import CHAINS
from debate.types import DebateResult, Failure, Opinion, Role, StateName, StateRecord, StopReason, Turn, Usage

__all__ = [
    "BUILTIN_ROLES",
    "PAPER_TRANSITION_RULES",
    "ChainDriver",
    "ChainError",
    "ChainSpec",
    "MarkovChain",
    "PriorOpinion",
    "RoleSpec",
    "TurnPlan",
    "TurnRecord",
    "explain_moves",
    "load_chain",
    "transcript_result",
]

Verdict = Literal["true", "false"]


class ChainError(UsageError, ValueError):
    """The chain definition is inconsistent; the message says what and where."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RoleSpec(_Spec):
    """A debate role: its prompt file and which earlier opinions it is shown."""

    prompt: str
    """Prompt name (packaged `prompts/`, `--prompts-dir`, or a .toml path relative to the chain file)."""
    sees: Literal["nothing", "previous", "round"]
    """nothing: only claim and evidence; previous: the opinion just before it (the previous state's final opinion
    when it speaks first); round: every opinion of its round so far (the Leader)."""
    title: str
    """How other agents' prompts name it (Trust, Skeptic, ...)."""


BUILTIN_ROLES: dict[str, RoleSpec] = {
    "initial": RoleSpec(prompt="initial", sees="nothing", title="initial"),
    "trust": RoleSpec(prompt="trust", sees="previous", title="Trust"),
    "skeptic": RoleSpec(prompt="skeptic", sees="previous", title="Skeptic"),
    "leader": RoleSpec(prompt="leader", sees="round", title="Leader"),
}
"""The paper's four agents (Tables 6-8, 12)."""


class ChainSpec(_Spec):
    """A chain: states, the initial state, transitions by the previous verdict, and any roles it adds."""

    name: str
    """The chain's name (recorded in every report)."""
    description: str = ""
    """What the chain is."""
    initial: StateName = "S0"
    """The state that runs once, first (round 0)."""
    states: dict[StateName, list[Role]] = Field(min_length=1)
    """State -> its speakers in order."""
    transitions: dict[str, dict[Verdict, StateName]]
    """State (or `*` for every state without its own entry) -> previous verdict -> next state."""
    roles: dict[Role, RoleSpec] = Field(default_factory=dict)
    """Roles beyond the built-in initial, trust, skeptic and leader (a built-in may be overridden)."""
    source: str | None = Field(default=None, exclude=True)
    """The file the spec was loaded from (prompt paths are relative to it)."""

    def role(self, name: str) -> RoleSpec:
        return self.roles.get(name) or BUILTIN_ROLES[name]

    def all_roles(self) -> list[str]:
        return list(dict.fromkeys(r for roles in self.states.values() for r in roles))

    def prompt_name(self, role: str) -> str:
        """The prompt `role` speaks with: a prompt name, or a .toml path, relative to the spec's own file."""
        name = self.role(role).prompt
        if name.endswith(".toml") and self.source is not None and not name.startswith("/"):
            return str(Path(self.source).parent / name)
        return name

    def next_state(self, state: str, verdict: bool) -> str:
        table = self.transitions.get(state) or self.transitions["*"]
        return table["true" if verdict else "false"]


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


def load_chain(name_or_path: str) -> MarkovChain:
    """A registered chain by name, or a chain spec file (TOML, or JSON with the same fields)."""
    path = Path(name_or_path)
    if name_or_path not in CHAINS and (path.suffix in (".toml", ".json") or path.is_file()):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ChainError(f"chain file {path}: {exc.strerror}") from exc
        try:
            raw: Any = tomllib.loads(data.decode()) if path.suffix != ".json" else __import__("json").loads(data)
        except (tomllib.TOMLDecodeError, ValueError, UnicodeDecodeError) as exc:
            raise ChainError(f"chain file {path}: not valid {path.suffix[1:].upper() or 'TOML'}: {exc}") from exc
        try:
            spec = ChainSpec.model_validate({**raw, "source": str(path.resolve())})
        except ValidationError as exc:
            raise ChainError(f"chain file {path}: {validation_problem(exc, '(file)')}") from exc
        return MarkovChain(spec)
    if name_or_path not in CHAINS:
        raise ChainError(CHAINS.unknown(name_or_path) + " (or give a chain spec file)")
    found = CHAINS.get(name_or_path)
    return MarkovChain(found() if callable(found) else found)


class MarkovChain:
    """A validated chain spec and its graph: states are nodes (attribute `roles`), each with one out-edge per
    verdict (edge key True/False)."""

    def __init__(self, spec: ChainSpec) -> None:
        self.spec = spec
        self.graph = nx.MultiDiGraph(name=spec.name)
        for state, roles in spec.states.items():
            self.graph.add_node(state, roles=tuple(roles), initial=state == spec.initial)
        self._validate()

    @property
    def name(self) -> str:
        return self.spec.name

    def _validate(self) -> None:
        spec, g = self.spec, self.graph
        where = f"chain {spec.name!r}"
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
                g.add_edge(state, target, key=verdict == "true")
        reachable = nx.descendants(g, spec.initial) | {spec.initial}
        unreachable = sorted(set(spec.states) - reachable)
        if unreachable:
            raise ChainError(f"{where}: state(s) {unreachable} cannot be reached from {spec.initial}")
        if len(spec.states) < 2:
            raise ChainError(f"{where}: a chain needs the initial state and at least one debate state")

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

    def __init__(self, chain: MarkovChain) -> None:
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


def explain_moves(result: DebateResult, chain: MarkovChain | None) -> list[str | None]:
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
