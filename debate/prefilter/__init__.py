"""Cheap checks that run before any debate: citation rules, logprob grounding, tool-call audits.

The `rules`, `logprob` and `rag-judge` prefilters are entry points of `markov_debate.prefilters` (the project's
pyproject.toml), as a plugin prefilter is; `BasePrefilter` supplies the defaults (a new prefilter writes only
`check`).
"""

from debate.prefilter._base import BasePrefilter, NoOptions
from debate.prefilter._cascade import Cascade, Undecided
from debate.prefilter._citations import (
    INVALID_CITATION_SEVERITY,
    CitationVariant,
    RulesOptions,
    RulesPrefilter,
    citation_check,
    cited_ids,
    extract_citations,
)
from debate.prefilter._grounding import (
    LogprobGroundingCheck,
    grounding_score,
    kl_bernoulli,
    yes_probability,
)
from debate.prefilter._judge import RagJudgeOptions, RagJudgePrefilter, combine_risk, parse_judgment
from debate.prefilter._logprob import LogprobOptions, LogprobPrefilter
from debate.prefilter._tool_correction import correction_message, self_correct
from debate.prefilter._tools import (
    APIEndpointChecker,
    CorrectionResult,
    DestructiveActionChecker,
    FactChecker,
    PermissionChecker,
    ToolCall,
    ToolCallChecker,
    ToolCallFinding,
    ToolDefinition,
    ToolRegistry,
)
from debate.types import CitationReport, GroundingResult

__all__ = [
    "INVALID_CITATION_SEVERITY",
    "APIEndpointChecker",
    "BasePrefilter",
    "Cascade",
    "CitationReport",
    "CitationVariant",
    "CorrectionResult",
    "DestructiveActionChecker",
    "FactChecker",
    "GroundingResult",
    "LogprobGroundingCheck",
    "LogprobOptions",
    "LogprobPrefilter",
    "NoOptions",
    "PermissionChecker",
    "RagJudgeOptions",
    "RagJudgePrefilter",
    "RulesOptions",
    "RulesPrefilter",
    "ToolCall",
    "ToolCallChecker",
    "ToolCallFinding",
    "ToolDefinition",
    "ToolRegistry",
    "Undecided",
    "citation_check",
    "cited_ids",
    "combine_risk",
    "correction_message",
    "extract_citations",
    "grounding_score",
    "kl_bernoulli",
    "parse_judgment",
    "self_correct",
    "yes_probability",
]
