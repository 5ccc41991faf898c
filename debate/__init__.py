"""markov-debate: hallucination detection by Markov-chain multi-agent debate (Sun et al. 2024)."""

from debate.api import Verifier, averify, verify
from debate.config import DebateConfig, ModelConfig, VerifierConfig
from debate.types import (
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    Opinion,
    Report,
    StateRecord,
    Turn,
    Usage,
)

__all__ = [
    "Claim",
    "ClaimVerdict",
    "DebateConfig",
    "DebateResult",
    "Evidence",
    "ModelConfig",
    "Opinion",
    "Report",
    "StateRecord",
    "Turn",
    "Usage",
    "Verifier",
    "VerifierConfig",
    "averify",
    "verify",
]
