"""The task stage: what a response is made into (its claims and where each claim's evidence comes from), one file
per built-in task, plus the helpers a plugin task builds on.

The built-ins are entry points of the group `markov_debate.tasks` (the project's pyproject.toml), as an installed
plugin's are (see docs/plugins.md); `BaseTask` supplies the defaults.
"""

from debate.tasks._base import BaseTask
from debate.tasks._common import (
    FixedEvidence,
    as_document,
    as_evidence,
    extract_claims,
    extraction_work,
    given_claims,
    reference_evidence,
)
from debate.tasks._rag import RagOptions, sources_from

__all__ = [
    "BaseTask",
    "FixedEvidence",
    "RagOptions",
    "as_document",
    "as_evidence",
    "extract_claims",
    "extraction_work",
    "given_claims",
    "reference_evidence",
    "sources_from",
]
