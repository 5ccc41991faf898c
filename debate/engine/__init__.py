"""The debate engine: the Markov chain as data (spec, built-ins, loader, validation, driver), what agents are shown,
their structured replies, and the prompt files.
"""

from debate.engine import _builtins  # noqa: F401  (importing registers the paper's chains)
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
from debate.engine._prompts import DEFAULT_PROMPT_SET, PROMPT_SETS, PromptError, PromptTemplate, load_prompt
from debate.engine._spec import BUILTIN_ROLES, ChainError, ChainSpec, RoleSpec
from debate.engine._structured import ChatConversation, Conversation, Structured, ask_structured, call_info, converse

__all__ = [
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
    "MarkovChain",
    "Outcome",
    "PriorOpinion",
    "PromptError",
    "PromptTemplate",
    "RoleModel",
    "RoleSpec",
    "Structured",
    "TurnPlan",
    "TurnRecord",
    "ask_structured",
    "call_info",
    "converse",
    "explain_moves",
    "load_chain",
    "load_json_object",
    "load_prompt",
    "outcome",
    "parse_factuality",
    "parse_opinion",
    "render_evidence",
    "render_opinion",
    "render_opinions",
    "transcript_result",
]
