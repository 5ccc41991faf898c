"""markov-debate: hallucination detection by Markov-chain multi-agent debate (Sun et al. 2024)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from debate._lazy import lazy_exports

if TYPE_CHECKING:
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
        EmbeddedModelError,
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
    from debate.pipeline import Verifier, averify, verify
    from debate.plugins import TaskInput
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

_WHERE = {
    "ClaimConfig": "debate.config",
    "DebateConfig": "debate.config",
    "ModelConfig": "debate.config",
    "PrefilterConfig": "debate.config",
    "RetrievalConfig": "debate.config",
    "SearchConfig": "debate.config",
    "TelemetryConfig": "debate.config",
    "VerifierConfig": "debate.config",
    "ContextTooLongError": "debate.errors",
    "DebateError": "debate.errors",
    "EvidenceUnavailableError": "debate.errors",
    "ExtractionError": "debate.errors",
    "Hint": "debate.errors",
    "InputError": "debate.errors",
    "ModelError": "debate.errors",
    "ModelRequestError": "debate.errors",
    "ModelUnavailableError": "debate.errors",
    "ReplyUnusableError": "debate.errors",
    "UsageError": "debate.errors",
    "ChatClient": "debate.llm",
    "EmbeddedModelError": "debate.errors",
    "TaskInput": "debate.plugins",
    "Verifier": "debate.pipeline",
    "averify": "debate.pipeline",
    "verify": "debate.pipeline",
    "load_run": "debate.results",
    "ScriptedChatClient": "debate.testing",
    "Claim": "debate.types",
    "ClaimVerdict": "debate.types",
    "DebateResult": "debate.types",
    "Evidence": "debate.types",
    "Failure": "debate.types",
    "Opinion": "debate.types",
    "Report": "debate.types",
    "StateRecord": "debate.types",
    "Turn": "debate.types",
    "Usage": "debate.types",
}
"""Where each public name lives: imported on first use (PEP 562), so that `import debate.config` or `debate
--help` does not pay for the whole engine (the debate team, HTTP clients, numpy)."""


_lazy_getattr, __dir__ = lazy_exports(__name__, _WHERE)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from debate.provenance import package_version

        return package_version()
    return _lazy_getattr(name)


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
    "TaskInput",
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
