"""The task stage: what a response is made into (its claims and where each claim's evidence comes from), one file
per built-in task, plus the helpers a plugin task builds on.

Importing this package registers the built-ins in `debate.plugins.TASKS`. A new task is one more file here
(registered with `TASKS.register`), or an installed package that declares an entry point in the group
`markov_debate.tasks` (see docs/plugins.md); `BaseTask` supplies the defaults.
"""

from debate.tasks import _dialogue, _general, _qa, _rag, _summarization  # noqa: F401  (importing registers)
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

__all__ = [
    "BaseTask",
    "FixedEvidence",
    "as_document",
    "as_evidence",
    "extract_claims",
    "extraction_work",
    "given_claims",
    "reference_evidence",
]
