"""The debate's agent roles, built on autogen-agentchat. Registered with the engine as the `autogen` team."""

from agents.selector_model import NoSelectorModel
from agents.team import AutogenTeam, AutogenTeamFactory

__all__ = ["AutogenTeam", "AutogenTeamFactory", "NoSelectorModel"]
