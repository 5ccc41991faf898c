"""markov-debate: hallucination detection by Markov-chain multi-agent debate (Sun et al. 2024)."""

from debate.api import Verifier, averify, verify
from debate.config import DebateConfig, ModelConfig, VerifierConfig
from debate.errors import (
    ContextTooLongError,
    DebateError,
    EvidenceUnavailableError,
    ExtractionError,
    Hint,
    InputError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    ReplyUnusableError,
    UsageError,
)
from debate.frames import load_run
from debate.llm.embedded import EmbeddedModelError
from debate.types import (
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    Failure,
    Opinion,
    Report,
    StateRecord,
    Turn,
    Usage,
)

__all__ = [
    "Claim",
    "ClaimVerdict",
    "ContextTooLongError",
    "DebateConfig",
    "DebateError",
    "DebateResult",
    "EmbeddedModelError",
    "Evidence",
    "EvidenceUnavailableError",
    "ExtractionError",
    "Failure",
    "Hint",
    "InputError",
    "ModelConfig",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "Opinion",
    "ReplyUnusableError",
    "Report",
    "StateRecord",
    "Turn",
    "Usage",
    "UsageError",
    "Verifier",
    "VerifierConfig",
    "averify",
    "load_run",
    "verify",
]
