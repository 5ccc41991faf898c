"""The debate engine: the Markov chain as data (spec, built-ins, loader, validation, driver), what agents are shown,
and what a chain's turns predict (expected outcomes, the posterior). Structured model calls and the prompt files
are debate.calls, which every stage uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from debate.engine._builtins import PAPER_TRANSITION_RULES
    from debate.engine._continuing import ContinuingTeam
    from debate.engine._driver import ChainDriver, PriorOpinion, TurnPlan, TurnRecord, explain_moves, transcript_result
    from debate.engine._expectation import Outcome, RoleModel, outcome, shown_in_state
    from debate.engine._graph import MarkovChain, load_chain
    from debate.engine._inputs import render_evidence, render_opinion, render_opinions
    from debate.engine._posterior import (
        BACKOFF_LEVELS,
        GovernedPath,
        Governor,
        PosteriorModel,
        PulledRoles,
        RoleTables,
        SegmentedPosterior,
        TurnContext,
        backoff_keys,
        chain_digest,
        governed_outcome,
        governed_paths,
        governed_result,
        result_records,
        turn_contexts,
    )
    from debate.errors import ChainError
    from debate.types import BUILTIN_ROLES, ChainSpec, RoleSpec

_WHERE = {
    "PAPER_TRANSITION_RULES": "debate.engine._builtins",
    "ChainDriver": "debate.engine._driver",
    "PriorOpinion": "debate.engine._driver",
    "TurnPlan": "debate.engine._driver",
    "TurnRecord": "debate.engine._driver",
    "explain_moves": "debate.engine._driver",
    "transcript_result": "debate.engine._driver",
    "Outcome": "debate.engine._expectation",
    "RoleModel": "debate.engine._expectation",
    "outcome": "debate.engine._expectation",
    "shown_in_state": "debate.engine._expectation",
    "BACKOFF_LEVELS": "debate.engine._posterior",
    "ContinuingTeam": "debate.engine._continuing",
    "GovernedPath": "debate.engine._posterior",
    "Governor": "debate.engine._posterior",
    "SegmentedPosterior": "debate.engine._posterior",
    "PosteriorModel": "debate.engine._posterior",
    "PulledRoles": "debate.engine._posterior",
    "RoleTables": "debate.engine._posterior",
    "TurnContext": "debate.engine._posterior",
    "backoff_keys": "debate.engine._posterior",
    "chain_digest": "debate.engine._posterior",
    "governed_outcome": "debate.engine._posterior",
    "governed_paths": "debate.engine._posterior",
    "governed_result": "debate.engine._posterior",
    "result_records": "debate.engine._posterior",
    "turn_contexts": "debate.engine._posterior",
    "MarkovChain": "debate.engine._graph",
    "load_chain": "debate.engine._graph",
    "render_evidence": "debate.engine._inputs",
    "render_opinion": "debate.engine._inputs",
    "render_opinions": "debate.engine._inputs",
    "BUILTIN_ROLES": "debate.types",
    "ChainError": "debate.errors",
    "ChainSpec": "debate.types",
    "RoleSpec": "debate.types",
}
"""Each name's module, imported on first use: naming a prompt set or the paper's rules needs no debate driver.
The paper's chains are debate.engine._builtins' specs, registered as entry points of markov_debate.chains."""

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "BACKOFF_LEVELS",
    "BUILTIN_ROLES",
    "PAPER_TRANSITION_RULES",
    "ChainDriver",
    "ChainError",
    "ChainSpec",
    "ContinuingTeam",
    "GovernedPath",
    "Governor",
    "MarkovChain",
    "Outcome",
    "PosteriorModel",
    "PriorOpinion",
    "PulledRoles",
    "RoleModel",
    "RoleSpec",
    "RoleTables",
    "SegmentedPosterior",
    "TurnContext",
    "TurnPlan",
    "TurnRecord",
    "backoff_keys",
    "chain_digest",
    "explain_moves",
    "governed_outcome",
    "governed_paths",
    "governed_result",
    "load_chain",
    "outcome",
    "render_evidence",
    "render_opinion",
    "render_opinions",
    "result_records",
    "shown_in_state",
    "transcript_result",
    "turn_contexts",
]
