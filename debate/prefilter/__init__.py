"""Cheap checks that run before any debate: citation rules, logprob grounding, tool-call audits."""

from debate.prefilter.citations import SourceRef, citation_check, extract_citations
from debate.prefilter.grounding import (
    ClaimGrounding,
    LogprobGroundingCheck,
    ResponseGrounding,
    grounding_score,
    kl_bernoulli,
    yes_probability,
)
from debate.prefilter.tools import (
    AllowListChecker,
    FactChecker,
    PermissionChecker,
    ToolCallChecker,
    ToolCallFinding,
    ToolDefinition,
    ToolRegistry,
    correction_message,
)
from debate.types import CitationReport, GroundingResult

__all__ = [
    "AllowListChecker",
    "CitationReport",
    "ClaimGrounding",
    "FactChecker",
    "GroundingResult",
    "LogprobGroundingCheck",
    "PermissionChecker",
    "ResponseGrounding",
    "SourceRef",
    "ToolCallChecker",
    "ToolCallFinding",
    "ToolDefinition",
    "ToolRegistry",
    "citation_check",
    "correction_message",
    "extract_citations",
    "grounding_score",
    "kl_bernoulli",
    "yes_probability",
]
