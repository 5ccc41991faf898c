"""Claim detection: a response cut into checkable claims (extraction, the subjective filter, RAG sentences), each
grounded in the response's text."""

from debate.claims._extract import (
    Extraction,
    LLMClaimExtractor,
    RagClaims,
    SubjectiveFilter,
    qa_claim,
    rag_claims,
    triplet_sentence,
)
from debate.claims._spans import MIN_SUPPORT, Grounded, ground_claims

__all__ = [
    "MIN_SUPPORT",
    "Extraction",
    "Grounded",
    "LLMClaimExtractor",
    "RagClaims",
    "SubjectiveFilter",
    "ground_claims",
    "qa_claim",
    "rag_claims",
    "triplet_sentence",
]
