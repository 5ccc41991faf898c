"""The basic values every stage passes on: usage, failures, evidence, sources, spans, claims."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from debate.types._names import ClaimKind, EvidenceKind, FailureKind

if TYPE_CHECKING:
    from debate.errors import DebateError

__all__ = ["Claim", "Evidence", "Failure", "Source", "Span", "Usage"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(_Model):
    """Model usage, summed over any number of calls."""

    llm_calls: int = Field(default=0, ge=0)
    """Number of completed model calls (HTTP retries of one call are not counted twice)."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Prompt tokens as reported by the endpoint."""
    completion_tokens: int = Field(default=0, ge=0)
    """Completion tokens as reported by the endpoint."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    def less(self, other: Usage) -> Usage:
        """This usage without `other`'s, each count at least 0 (a part taken out of a total)."""
        return Usage(
            llm_calls=max(0, self.llm_calls - other.llm_calls),
            prompt_tokens=max(0, self.prompt_tokens - other.prompt_tokens),
            completion_tokens=max(0, self.completion_tokens - other.completion_tokens),
        )

    @classmethod
    def total(cls, items: Iterable[Usage]) -> Usage:
        calls = prompt = completion = 0
        for item in items:
            calls, prompt, completion = (
                calls + item.llm_calls,
                prompt + item.prompt_tokens,
                completion + item.completion_tokens,
            )
        # One model for the sum, not one per item added (a report sums several per claim).
        return cls(llm_calls=calls, prompt_tokens=prompt, completion_tokens=completion)


class Failure(_Model):
    """Why a stage could not finish its work on a claim or response. Never a verdict."""

    kind: FailureKind
    """What went wrong (model unavailable, reply unusable, ...)."""
    message: str
    """What happened, in one line."""
    stage: str
    """Where: extraction, evidence, prefilter:<name>, debate."""
    transient: bool = False
    """True when the same work may succeed later (endpoint down, timeouts, 5xx): such results are redone."""

    @classmethod
    def from_error(cls, exc: DebateError, stage: str) -> Failure:
        return cls(kind=exc.kind, message=str(exc), stage=stage, transient=exc.transient)


class Evidence(_Model):
    """One piece of evidence a claim is judged against."""

    text: str = Field(min_length=1)
    """The evidence text shown to the agents."""
    source: str | None = None
    """Where it came from: a file path, document id, sentence index or URL."""
    kind: EvidenceKind = "given"
    """How it was obtained."""
    score: float | None = None
    """Retrieval score, when retrieved."""
    query: str | None = None
    """The search query that found it, when searched."""


class Source(_Model):
    """A retrievable source a RAG answer may cite as [id]."""

    id: str = Field(min_length=1)
    """The source's id."""
    text: str = ""
    """Its text (empty when only its id matters, e.g. for the citation rules)."""
    parent_id: str | None = None
    """The containing document's id; citing it is valid too."""


class Span(_Model):
    """A character range of the response: response[start:end]."""

    start: int = Field(ge=0)
    """First character."""
    end: int = Field(ge=0)
    """One past the last character."""


class Claim(_Model):
    """One checkable claim."""

    id: str
    """Stable id within its response (c0, c1, ...)."""
    text: str = Field(min_length=1)
    """The claim as shown to the agents."""
    kind: ClaimKind
    """How the claim was formed."""
    triplet: tuple[str, str, str] | None = None
    """(subject, predicate, object) when extracted as a RefChecker triplet; `text` is its sentence form."""
    citations: list[str] = Field(default_factory=list)
    """Source ids the claim cites as [id] (rag task)."""
    spans: list[Span] = Field(default_factory=list)
    """Where in the response the claim comes from (empty for claims the caller gave and the response does not
    contain word for word)."""
