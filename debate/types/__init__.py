"""The pydantic models passed between stages: claims, evidence, agent turns, states, verdicts, reports.

One module per concern (core values, the debate transcript, each prefilter's outputs, the report); every model is
re-exported here, so `from debate.types import Report` is the import to use."""

from debate.types._chain import BUILTIN_ROLES, ChainSpec, RoleSpec
from debate.types._chat import ChatClient, ChatMessage, ChatRequest, ChatResponse, TokenLogprob, TopLogprob
from debate.types._core import Claim, Evidence, Failure, Source, Span, Usage
from debate.types._grounding import GroundedClaim, GroundingResult, HallucinationCheck
from debate.types._names import (
    ClaimKind,
    ClaimLabel,
    ClaimStatus,
    DecidedBy,
    EvidenceKind,
    FailureKind,
    GroundingBand,
    PrefilterName,
    ReportVerdict,
    RiskLevel,
    Role,
    RollupName,
    StateName,
    StopReason,
    StopRule,
    StopSetting,
    TaskName,
    parse_stop,
)
from debate.types._prefilter import PrefilterDecision, PrefilterSummary, ResponseCheck
from debate.types._rag import CitationReport, JudgeRubric, RagJudgment, RiskAction
from debate.types._report import (
    CalibrationNote,
    ClaimRatios,
    ClaimVerdict,
    ExtractionInfo,
    LocatedEvidence,
    Report,
    RunMeta,
)
from debate.types._tools import CorrectionResult, ToolCall, ToolCallFinding
from debate.types._transcript import CallInfo, DebateResult, Opinion, SentMessage, StateRecord, Turn

__all__ = [
    "BUILTIN_ROLES",
    "CalibrationNote",
    "CallInfo",
    "ChainSpec",
    "ChatClient",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
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
    "RoleSpec",
    "RollupName",
    "RunMeta",
    "SentMessage",
    "Source",
    "Span",
    "StateName",
    "StateRecord",
    "StopReason",
    "StopRule",
    "StopSetting",
    "TaskName",
    "TokenLogprob",
    "ToolCall",
    "ToolCallFinding",
    "TopLogprob",
    "Turn",
    "Usage",
    "parse_stop",
]
