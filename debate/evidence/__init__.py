"""Evidence for each claim: a document's top sentences (BM25 or dense), a search backend's snippets, and where a
verdict's evidence sits in the document.
"""

from debate.evidence._localize import localize
from debate.evidence._retrieval import (
    BM25Retriever,
    DenseRetriever,
    DocumentEvidence,
    RetrievalCache,
    document_evidence,
)
from debate.evidence._search import (
    NO_RESULT,
    LocalCollectionSearch,
    SearchEvidence,
    SerperSearch,
    factool_snippets,
    generate_queries,
)

__all__ = [
    "NO_RESULT",
    "BM25Retriever",
    "DenseRetriever",
    "DocumentEvidence",
    "LocalCollectionSearch",
    "RetrievalCache",
    "SearchEvidence",
    "SerperSearch",
    "document_evidence",
    "factool_snippets",
    "generate_queries",
    "localize",
]
