"""A chain spec (the data the engine builds a Markov chain from, and what a plugin registers): the states with their
ordered roles, the initial state, the transition table from the previous verdict to the next state, and the roles a
spec adds (the paper's four are built in)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.types._names import Role, StateName

__all__ = ["BUILTIN_ROLES", "ChainSpec", "RoleSpec", "Verdict"]

Verdict = Literal["true", "false"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RoleSpec(_Spec):
    """A debate role: its prompt file and which earlier opinions it is shown."""

    prompt: str
    """Prompt name (packaged `prompts/`, `--prompt-set`, or a .toml path relative to the chain file)."""
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
