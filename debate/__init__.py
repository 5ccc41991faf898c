"""markov-debate: hallucination detection by Markov-chain multi-agent debate (Sun et al. 2024)."""

from debate.config import (
    ClaimConfig,
    DebateConfig,
    ModelConfig,
    PrefilterConfig,
    RetrievalConfig,
    SearchConfig,
    TelemetryConfig,
    VerifierConfig,
)
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
from debate.llm import ChatClient
from debate.llm._embedded import EmbeddedModelError
from debate.pipeline import Verifier, averify, verify
from debate.provenance import package_version
from debate.results import load_run
from debate.testing import ScriptedChatClient
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

__version__ = package_version()
"""The installed markov-debate version."""

__all__ = [
    "ChatClient",
    "Claim",
    "ClaimConfig",
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
    "PrefilterConfig",
    "ReplyUnusableError",
    "Report",
    "RetrievalConfig",
    "ScriptedChatClient",
    "SearchConfig",
    "StateRecord",
    "TelemetryConfig",
    "Turn",
    "Usage",
    "UsageError",
    "Verifier",
    "VerifierConfig",
    "__version__",
    "averify",
    "load_run",
    "verify",
]
