"""The pydantic models passed between stages: claims, evidence, agent turns, states, verdicts, reports.

One module per concern (core values, the debate transcript, each prefilter's outputs, the report); every model is
re-exported here, so `from debate.types import Report` is the import to use."""

from debate.errors import FailureKind
from debate.types.core import Claim, Evidence, Failure, Source, Span, Usage
from debate.types.grounding import GroundedClaim, GroundingResult, HallucinationCheck
from debate.types.names import (
    ClaimKind,
    ClaimLabel,
    ClaimStatus,
    DecidedBy,
    EvidenceKind,
    GroundingBand,
    PrefilterName,
    ReportVerdict,
    RiskLevel,
    Role,
    RollupName,
    StateName,
    StopReason,
    TaskName,
)
from debate.types.prefilter import PrefilterDecision, PrefilterSummary, ResponseCheck
from debate.types.rag import CitationReport, JudgeRubric, RagJudgment, RiskAction
from debate.types.report import ClaimRatios, ClaimVerdict, ExtractionInfo, LocatedEvidence, Report, RunMeta
from debate.types.tools import CorrectionResult, ToolCall, ToolCallFinding
from debate.types.transcript import CallInfo, DebateResult, Opinion, SentMessage, StateRecord, Turn

__all__ = [
    "CallInfo",
    "CitationReport",
    "Claim",
    "ClaimKind",
    "ClaimLabel",
    "ClaimRatios",
    "ClaimStatus",
    "ClaimVerdict",
    "CorrectionResult",
    "DebateResult",
    "DecidedBy",
    "Evidence",
    "EvidenceKind",
    "ExtractionInfo",
    "Failure",
    "FailureKind",
    "GroundedClaim",
    "GroundingBand",
    "GroundingResult",
    "HallucinationCheck",
    "JudgeRubric",
    "LocatedEvidence",
    "Opinion",
    "PrefilterDecision",
    "PrefilterName",
    "PrefilterSummary",
    "RagJudgment",
    "Report",
    "ReportVerdict",
    "ResponseCheck",
    "RiskAction",
    "RiskLevel",
    "Role",
    "RollupName",
    "RunMeta",
    "SentMessage",
    "Source",
    "Span",
    "StateName",
    "StateRecord",
    "StopReason",
    "TaskName",
    "ToolCall",
    "ToolCallFinding",
    "Turn",
    "Usage",
]
