"""The debate engine: the Markov chain as data (spec, built-ins, loader, validation, driver), what agents are shown,
and what a chain's turns predict (expected outcomes, the posterior). Structured model calls and the prompt files
are debate.calls, which every stage uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from debate.engine._builtins import PAPER_TRANSITION_RULES
    from debate.engine._continuing import NO_TURNS, ContinuingTeam, StopCheck
    from debate.engine._driver import ChainDriver, PriorOpinion, TurnPlan, TurnRecord, explain_moves, transcript_result
    from debate.engine._expectation import Outcome, RoleModel, outcome, shown_in_state
    from debate.engine._graph import MarkovChain, load_chain
    from debate.engine._inputs import render_evidence, render_opinion, render_opinions
    from debate.engine._interval import IntervalGovernor, worst_case
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
    from debate.engine._reach import (
        Ends,
        Handover,
        Position,
        Reach,
        TeamReach,
        cascade_reach,
        ends_of,
        position_after,
        reach_from,
        read_ends,
        segment_events,
    )
    from debate.engine._voi import Worth, context_seen, next_context, turn_worth
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
    "NO_TURNS": "debate.engine._continuing",
    "StopCheck": "debate.engine._continuing",
    "Ends": "debate.engine._reach",
    "Handover": "debate.engine._reach",
    "Position": "debate.engine._reach",
    "Reach": "debate.engine._reach",
    "TeamReach": "debate.engine._reach",
    "cascade_reach": "debate.engine._reach",
    "ends_of": "debate.engine._reach",
    "read_ends": "debate.engine._reach",
    "position_after": "debate.engine._reach",
    "reach_from": "debate.engine._reach",
    "segment_events": "debate.engine._reach",
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
    "IntervalGovernor": "debate.engine._interval",
    "Worth": "debate.engine._voi",
    "context_seen": "debate.engine._voi",
    "next_context": "debate.engine._voi",
    "turn_worth": "debate.engine._voi",
    "worst_case": "debate.engine._interval",
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
    "NO_TURNS",
    "PAPER_TRANSITION_RULES",
    "ChainDriver",
    "ChainError",
    "ChainSpec",
    "ContinuingTeam",
    "Ends",
    "GovernedPath",
    "Governor",
    "Handover",
    "IntervalGovernor",
    "MarkovChain",
    "Outcome",
    "Position",
    "PosteriorModel",
    "PriorOpinion",
    "PulledRoles",
    "Reach",
    "RoleModel",
    "RoleSpec",
    "RoleTables",
    "SegmentedPosterior",
    "StopCheck",
    "TeamReach",
    "TurnContext",
    "TurnPlan",
    "TurnRecord",
    "Worth",
    "backoff_keys",
    "cascade_reach",
    "chain_digest",
    "context_seen",
    "ends_of",
    "explain_moves",
    "governed_outcome",
    "governed_paths",
    "governed_result",
    "load_chain",
    "next_context",
    "outcome",
    "position_after",
    "reach_from",
    "read_ends",
    "render_evidence",
    "render_opinion",
    "render_opinions",
    "result_records",
    "segment_events",
    "shown_in_state",
    "transcript_result",
    "turn_contexts",
    "turn_worth",
    "worst_case",
]
