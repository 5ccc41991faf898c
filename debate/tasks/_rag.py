"""rag: each sentence of an answer that cites sources as [id] is a claim, judged against the sources it cites
(all sources when it cites none); the sources are what the citation prefilter checks ids against."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from debate.claims import rag_claims
from debate.config import VerifierConfig
from debate.errors import InputError
from debate.plugins import Plan, Reference, StageContext, TaskInput, TaskWork
from debate.sources import read_sources
from debate.types import CitationVariant, Claim, Evidence, ExtractionInfo, Source, Usage

__all__ = ["CitedSources", "RagOptions", "RagTask", "cited_sources", "sources_from"]


_SOURCES_FORM = "{id: text} or [{id, text, parent_id}]"


def sources_from(reference: Reference | Sequence[Mapping[str, str]]) -> list[Source]:
    """RAG sources from {id: text} or a list of {id, text, parent_id}; anything else, no source at all, or sources
    whose texts are all blank (nothing to check an answer against) is an InputError naming the source."""
    if isinstance(reference, str) or not isinstance(reference, Mapping | Sequence):
        got = "text" if isinstance(reference, str) else type(reference).__name__
        raise InputError(f"task rag needs the sources as `reference`: {_SOURCES_FORM}; got {got}")
    if isinstance(reference, Mapping):
        sources = []
        for key, text in reference.items():
            if not isinstance(text, str):
                raise InputError(
                    f"reference: source {str(key)[:80]!r}: its text must be a string, got {type(text).__name__}"
                )
            if not str(key):
                raise InputError(f"reference: a source's id is empty; each needs one ({_SOURCES_FORM})")
            sources.append(Source(id=str(key), text=text))
    else:
        if _passages(reference):
            raise InputError(
                "task rag needs sources with ids that its citations name ({id: text} or [{id, text, parent_id}]); "
                "a list of texts has none, so every citation would be invalid"
            )
        sources = read_sources(reference)
    if not sources:
        raise InputError(f"reference: no sources given; task rag needs at least one ({_SOURCES_FORM})")
    if not any(s.text.strip() for s in sources):
        raise InputError("reference: every source's text is blank: there is nothing to check the answer against")
    return sources


def _passages(items: Sequence[object]) -> bool:
    """A list of plain texts, as the readers turn it into evidence ("passage 1", "passage 2", ...): no ids."""
    return bool(items) and all(
        isinstance(item, Evidence) and item.kind == "given" and item.source == f"passage {index}"
        for index, item in enumerate(items, 1)
    )


def cited_sources(sources: Sequence[Source], claim: Claim) -> list[Source]:
    """The sources a claim cites, by their own id or their parent's."""
    cited = set(claim.citations)
    return [s for s in sources if s.id in cited or (s.parent_id is not None and s.parent_id in cited)]


class CitedSources:
    """EvidenceSource: the sources a claim cites, or all sources when it cites none."""

    def __init__(self, sources: list[Source]) -> None:
        self._sources = sources

    async def evidence(self, claim: Claim) -> tuple[list[Evidence], Usage]:
        chosen = cited_sources(self._sources, claim) or self._sources
        # A source cited for its id alone (no text) is no evidence for the debate.
        return [Evidence(text=s.text, source=s.id, kind="given") for s in chosen if s.text.strip()], Usage()


class RagOptions(BaseModel):
    """The `rag` task's options (`task_options.rag`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    citation_variant: CitationVariant = "seed"
    """How citations are read: seed (the RAG rules exactly: distinct valid ids, the bracket's content as one id,
    sentences split at . ! ?) or occurrences (a named departure: every valid occurrence counts, `[a, b]` cites two
    ids, an abbreviation-aware split). The prefilters that check citations read them the same way."""


class RagTask:
    """cited sentences vs. the sources they cite."""

    name = "rag"
    Options = RagOptions

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        if item.reference is None:
            raise InputError("task rag needs the sources as `reference`: {id: text} or [{id, text, parent_id}]")
        sources = sources_from(item.reference)
        config = ctx.config
        variant = config.task_options_for(self.name, RagOptions).citation_variant
        found = rag_claims(
            item.response,
            variant,
            min_chars=config.claims.min_chars,
            max_claims=config.claims.max_claims,
            language=config.language,
        )
        notes = found.notes(config.claims.min_chars, config.claims.max_claims)
        return Plan(
            found.claims,
            ExtractionInfo(method="rag-sentences"),
            CitedSources(sources),
            notes=notes,
            sources=sources,
            citation_variant=variant,
        )

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork:
        """Claims are found by rule (exact); each is judged against the sources it cites."""
        if item.reference is None:
            raise InputError("task rag needs the sources as `reference`: {id: text} or [{id, text, parent_id}]")
        sources = sources_from(item.reference)
        found = rag_claims(
            item.response,
            config.task_options_for(self.name, RagOptions).citation_variant,
            min_chars=config.claims.min_chars,
            max_claims=config.claims.max_claims,
            language=config.language,
        )
        claims = found.claims
        cited = [sum(len(s.text) for s in cited_sources(sources, claim)) for claim in claims]
        return TaskWork(
            claims=len(claims),
            claim_chars=sum(len(c.text) for c in claims) / max(1, len(claims)),
            evidence_chars=sum(cited) / max(1, len(cited)),
        )
