"""Named implementations of the engine's protocols. Agent teams come from entry points, so the engine never
imports the packages that implement them (imports flow experiments -> agents -> debate)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Protocol

from debate.config import DebateConfig
from debate.llm import ChatClient
from debate.runner import AgentTeam

__all__ = ["TEAM_ENTRY_POINT_GROUP", "TeamFactory", "load_team_factory", "register_team"]

TEAM_ENTRY_POINT_GROUP = "markov_debate.teams"


class TeamFactory(Protocol):
    """Makes a fresh AgentTeam per claim and reports the prompt files it uses."""

    def new_team(self, *, client: ChatClient, config: DebateConfig) -> AgentTeam: ...

    def prompt_hashes(self) -> dict[str, str]: ...


_REGISTERED: dict[str, Callable[..., TeamFactory]] = {}


def register_team(name: str, factory: Callable[..., TeamFactory]) -> None:
    """Register a team implementation in-process (entry points register installed ones)."""
    _REGISTERED[name] = factory


def load_team_factory(name: str, *, prompts_dir: str | None = None) -> TeamFactory:
    """Instantiate the team implementation registered under `name`."""
    if name in _REGISTERED:
        return _REGISTERED[name](prompts_dir=prompts_dir)
    found = {ep.name: ep for ep in entry_points(group=TEAM_ENTRY_POINT_GROUP)}
    if name not in found:
        known = sorted({*found, *_REGISTERED})
        raise LookupError(
            f"no agent team named {name!r} (known: {known or 'none'}); is markov-debate installed (pip install -e .)?"
        )
    factory: Callable[..., TeamFactory] = found[name].load()
    return factory(prompts_dir=prompts_dir)
