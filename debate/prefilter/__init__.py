"""Cheap checks that run before any debate: citation rules, logprob grounding, tool-call audits.

The `rules`, `logprob` and `rag-judge` prefilters register themselves in `debate.stages.PREFILTERS` when this package is
imported; a plugin prefilter is one more module registering itself, or an entry point in `markov_debate.prefilters`.
"""

from debate.prefilter.citations import INVALID_CITATION_SEVERITY, RulesPrefilter, citation_check, extract_citations
from debate.prefilter.grounding import (
    LogprobGroundingCheck,
    LogprobPrefilter,
    grounding_score,
    kl_bernoulli,
    yes_probability,
)
from debate.prefilter.judge import RagJudgePrefilter, combine_risk, parse_judgment
from debate.prefilter.tools import (
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
    correction_message,
    self_correct,
)
from debate.types import CitationReport, GroundingResult

__all__ = [
    "INVALID_CITATION_SEVERITY",
    "APIEndpointChecker",
    "CitationReport",
    "CorrectionResult",
    "DestructiveActionChecker",
    "FactChecker",
    "GroundingResult",
    "LogprobGroundingCheck",
    "LogprobPrefilter",
    "PermissionChecker",
    "RagJudgePrefilter",
    "RulesPrefilter",
    "ToolCall",
    "ToolCallChecker",
    "ToolCallFinding",
    "ToolDefinition",
    "ToolRegistry",
    "citation_check",
    "combine_risk",
    "correction_message",
    "extract_citations",
    "grounding_score",
    "kl_bernoulli",
    "parse_judgment",
    "self_correct",
    "yes_probability",
]
