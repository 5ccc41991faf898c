"""The debate engine: the Markov chain as data (spec, built-ins, loader, validation, driver), what agents are shown,
their structured replies, and the prompt files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debate._lazy import lazy_exports

if TYPE_CHECKING:
    from debate.engine._builtins import PAPER_TRANSITION_RULES
    from debate.engine._driver import ChainDriver, PriorOpinion, TurnPlan, TurnRecord, explain_moves, transcript_result
    from debate.engine._expectation import Outcome, RoleModel, outcome
    from debate.engine._graph import MarkovChain, load_chain
    from debate.engine._inputs import render_evidence, render_opinion, render_opinions
    from debate.engine._parsing import (
        OPINION_FORMAT,
        OPINION_FORMAT_THREE_WAY,
        OPINION_SCHEMA,
        OPINION_SCHEMA_THREE_WAY,
        load_json_object,
        parse_factuality,
        parse_opinion,
    )
    from debate.engine._posterior import (
        BACKOFF_LEVELS,
        GovernedPath,
        PosteriorModel,
        RoleTables,
        TurnContext,
        backoff_keys,
        chain_digest,
        governed_outcome,
        governed_paths,
        governed_result,
        result_records,
        turn_contexts,
    )
    from debate.engine._prompts import DEFAULT_PROMPT_SET, PROMPT_SETS, PromptError, PromptTemplate, load_prompt
    from debate.engine._spec import BUILTIN_ROLES, ChainError, ChainSpec, RoleSpec
    from debate.engine._structured import (
        ChatConversation,
        Conversation,
        Structured,
        ask_structured,
        call_info,
        converse,
    )

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
    "BACKOFF_LEVELS": "debate.engine._posterior",
    "GovernedPath": "debate.engine._posterior",
    "PosteriorModel": "debate.engine._posterior",
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
    "OPINION_FORMAT": "debate.engine._parsing",
    "OPINION_FORMAT_THREE_WAY": "debate.engine._parsing",
    "OPINION_SCHEMA": "debate.engine._parsing",
    "OPINION_SCHEMA_THREE_WAY": "debate.engine._parsing",
    "load_json_object": "debate.engine._parsing",
    "parse_factuality": "debate.engine._parsing",
    "parse_opinion": "debate.engine._parsing",
    "DEFAULT_PROMPT_SET": "debate.engine._prompts",
    "PROMPT_SETS": "debate.engine._prompts",
    "PromptError": "debate.engine._prompts",
    "PromptTemplate": "debate.engine._prompts",
    "load_prompt": "debate.engine._prompts",
    "BUILTIN_ROLES": "debate.engine._spec",
    "ChainError": "debate.engine._spec",
    "ChainSpec": "debate.engine._spec",
    "RoleSpec": "debate.engine._spec",
    "ChatConversation": "debate.engine._structured",
    "Conversation": "debate.engine._structured",
    "Structured": "debate.engine._structured",
    "ask_structured": "debate.engine._structured",
    "call_info": "debate.engine._structured",
    "converse": "debate.engine._structured",
}
"""Each name's module, imported on first use: naming a prompt set or the paper's rules needs no debate driver.
The paper's chains are registered by debate.engine._builtins, which CHAINS imports when it is first used."""

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = [
    "BACKOFF_LEVELS",
    "BUILTIN_ROLES",
    "DEFAULT_PROMPT_SET",
    "OPINION_FORMAT",
    "OPINION_FORMAT_THREE_WAY",
    "OPINION_SCHEMA",
    "OPINION_SCHEMA_THREE_WAY",
    "PAPER_TRANSITION_RULES",
    "PROMPT_SETS",
    "ChainDriver",
    "ChainError",
    "ChainSpec",
    "ChatConversation",
    "Conversation",
    "GovernedPath",
    "MarkovChain",
    "Outcome",
    "PosteriorModel",
    "PriorOpinion",
    "PromptError",
    "PromptTemplate",
    "RoleModel",
    "RoleSpec",
    "RoleTables",
    "Structured",
    "TurnContext",
    "TurnPlan",
    "TurnRecord",
    "ask_structured",
    "backoff_keys",
    "call_info",
    "chain_digest",
    "converse",
    "explain_moves",
    "governed_outcome",
    "governed_paths",
    "governed_result",
    "load_chain",
    "load_json_object",
    "load_prompt",
    "outcome",
    "parse_factuality",
    "parse_opinion",
    "render_evidence",
    "render_opinion",
    "render_opinions",
    "result_records",
    "transcript_result",
    "turn_contexts",
]
