"""Cheap checks that run before any debate: citation rules, logprob grounding, tool-call audits.

The `rules`, `logprob` and `rag-judge` prefilters register themselves in `debate.plugins.PREFILTERS` when this
package is imported; a plugin prefilter is one more module registering itself, or an entry point in
`markov_debate.prefilters`, and `BasePrefilter` supplies the defaults (a new prefilter writes only `check`).
"""

from debate.prefilter._base import BasePrefilter, NoOptions
from debate.prefilter._cascade import Cascade, Undecided
from debate.prefilter._citations import (
    INVALID_CITATION_SEVERITY,
    CitationVariant,
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
from debate.prefilter._judge import RagJudgePrefilter, combine_risk, parse_judgment
from debate.prefilter._logprob import LogprobPrefilter
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
    "LogprobPrefilter",
    "NoOptions",
    "PermissionChecker",
    "RagJudgePrefilter",
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
