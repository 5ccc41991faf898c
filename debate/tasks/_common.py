"""What several tasks share: reference handling, fixed evidence, claim extraction and document/search evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from debate.claims import Extraction, LLMClaimExtractor
from debate.retrieval import DocumentEvidence
from debate.search import SearchEvidence
from debate.stages import EvidenceSource, Reference, StageContext, TaskInput
from debate.types import Claim, Evidence, ExtractionInfo, Source, Usage

__all__ = [
    "FixedEvidence",
    "as_document",
    "as_evidence",
    "extract_claims",
    "given_claims",
    "reference_evidence",
]


def as_evidence(reference: Reference | None, source: str | None) -> list[Evidence]:
    """Knowledge text, {id: text}, or evidence/source items, as evidence."""
    if reference is None:
        return []
    if isinstance(reference, str):
        return [Evidence(text=reference.strip(), source=source, kind="given")] if reference.strip() else []
    if isinstance(reference, Mapping):
        return [Evidence(text=str(text), source=str(sid), kind="given") for sid, text in reference.items()]
    items: Sequence[Evidence | Source] = reference
    return [item if isinstance(item, Evidence) else Evidence(text=item.text, source=item.id) for item in items]


def as_document(reference: Reference | None) -> str | None:
    if reference is None:
        return None
    text = reference if isinstance(reference, str) else "\n".join(e.text for e in as_evidence(reference, None))
    return text if text.strip() else None


class FixedEvidence:
    """EvidenceSource: the same evidence for every claim."""

    def __init__(self, evidence: list[Evidence]) -> None:
        self._evidence = evidence

    async def evidence(self, claim: Claim) -> tuple[list[Evidence], Usage]:
        return list(self._evidence), Usage()


def given_claims(item: TaskInput) -> Extraction | None:
    """The caller's own claims, when given (no extraction)."""
    if item.claims is None:
        return None
    texts = [t.strip() for t in item.claims if t.strip()]
    return Extraction(
        claims=[Claim(id=f"c{i}", text=t, kind="atomic") for i, t in enumerate(texts)],
        info=ExtractionInfo(method="given"),
    )


async def extract_claims(text: str, *, context: str | None, ctx: StageContext) -> Extraction:
    cfg = ctx.config.claims
    extractor = LLMClaimExtractor(
        ctx.client, format=cfg.format, max_claims=cfg.max_claims, max_retries=cfg.max_parse_retries,
        prompts_dir=ctx.prompts_dir, prompt=cfg.prompt,
    )  # fmt: skip
    return await extractor.extract(text, context=context)


def reference_evidence(reference: Reference | None, ctx: StageContext, notes: list[str]) -> EvidenceSource:
    """Top-k sentences of the reference document when there is one; else search results when a backend is
    configured; else no evidence (knowledge-free, said in a note)."""
    document = as_document(reference)
    if document is not None:
        return DocumentEvidence(
            document,
            retriever=ctx.retriever(),
            k=ctx.config.retrieval.top_k,
            cache=ctx.cache,
            language=ctx.config.language,
        )
    backend = ctx.search_backend()
    if backend is not None:
        assert ctx.config.search is not None
        return SearchEvidence(
            client=ctx.client, backend=backend, config=ctx.config.search, cache=ctx.cache,
            max_retries=ctx.config.claims.max_parse_retries, prompts_dir=ctx.prompts_dir,
        )  # fmt: skip
    notes.append("no reference and no search backend: claims were judged from the model's own knowledge")
    return FixedEvidence([])
