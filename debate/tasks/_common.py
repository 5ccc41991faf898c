"""What several tasks share: reference handling, fixed evidence, claim extraction and document/search evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from debate.calls import load_prompt
from debate.claims import Extraction, LLMClaimExtractor
from debate.config import VerifierConfig
from debate.evidence import DocumentEvidence, SearchEvidence
from debate.plugins import EvidenceSource, Reference, StageContext, TaskInput, TaskWork
from debate.sentences import split_sentences
from debate.types import Claim, Evidence, ExtractionInfo, Source, Usage

__all__ = [
    "FixedEvidence",
    "as_document",
    "as_evidence",
    "evidence_chars",
    "extract_claims",
    "extraction_work",
    "given_claims",
    "reference_evidence",
]


def as_evidence(reference: Reference | None, source: str | None) -> list[Evidence]:
    """Knowledge text, {id: text}, or evidence/source items, as evidence."""
    if reference is None:
        return []
    if isinstance(reference, str):
        return [Evidence(text=reference.strip(), source=source, kind="given")] if reference.strip() else []
    # A passage with no text is no evidence (a source's id alone matters only to task rag, which reads its sources
    # itself): left out, as a blank knowledge text is, instead of refusing the item.
    if isinstance(reference, Mapping):
        return [
            Evidence(text=str(text), source=str(sid), kind="given")
            for sid, text in reference.items()
            if str(text).strip()
        ]
    items: Sequence[Evidence | Source] = reference
    return [
        item if isinstance(item, Evidence) else Evidence(text=item.text, source=item.id)
        for item in items
        if item.text.strip()
    ]


def as_document(reference: Reference | None) -> str | None:
    """The reference as one text (evidence items joined by lines); None without one."""
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
    """The claims of `text` by the configured extractor (format, prompt, cap), with the run's re-ask limit.

    Raises:
        ExtractionError: the model's replies stayed unusable.
    """
    cfg = ctx.config.claims
    extractor = LLMClaimExtractor(
        ctx.client,
        format=cfg.format,
        max_claims=cfg.max_claims,
        max_retries=cfg.max_parse_retries,
        prompts_dir=ctx.prompts_dir,
        prompt=cfg.prompt,
    )
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
            client=ctx.client,
            backend=backend,
            config=ctx.config.search,
            cache=ctx.cache,
            max_retries=ctx.config.claims.max_parse_retries,
            prompts_dir=ctx.prompts_dir,
        )
    notes.append("no reference and no search backend: claims were judged from the model's own knowledge")
    return FixedEvidence([])


def _prompt_chars(config: VerifierConfig) -> int:
    default = "factool_claims" if config.claims.format == "sentence" else "extract_triplets"
    prompt = load_prompt(config.claims.prompt or default, None)
    return len(prompt.system) + len(prompt.user)


def evidence_chars(reference: Reference | None, config: VerifierConfig) -> float:
    """Characters of one claim's evidence: the top-k sentences of a document (at most all of it), else search
    results, else none."""
    document = as_document(reference)
    if document is not None:
        sentences = split_sentences(document, config.language) or [document]
        return min(len(document), config.retrieval.top_k * len(document) / len(sentences))
    if config.search is not None:
        return config.search.queries_per_claim * config.search.results_per_query * _SNIPPET_CHARS
    return 0.0


_SNIPPET_CHARS = 250
"""A search result's title and snippet, typically."""


def extraction_work(item: TaskInput, config: VerifierConfig, *, calls: int = 1) -> TaskWork:
    """The work of a task that extracts claims from the response (`calls` model calls before the claims),
    unless the caller gave them."""
    searching = config.search is not None and as_document(item.reference) is None
    evidence, per_claim = evidence_chars(item.reference, config), 1.0 if searching else 0.0
    if item.claims is not None:
        texts = [t for t in item.claims if t.strip()]
        mean = sum(map(len, texts)) / max(1, len(texts))
        return TaskWork(claims=len(texts), claim_chars=mean, evidence_chars=evidence, claim_calls=per_claim)
    sentences = len(split_sentences(item.response, config.language)) or 1
    claims = min(sentences, config.claims.max_claims or sentences)
    sent = _prompt_chars(config) + len(item.response) + len(item.question or "")
    return TaskWork(
        claims=claims,
        calls=calls,
        input_chars=calls * sent,
        claim_chars=len(item.response) / sentences,
        evidence_chars=evidence,
        claim_calls=per_claim,
    )
