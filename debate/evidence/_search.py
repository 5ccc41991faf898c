"""Evidence from search, for claims with no reference: Factool-style queries sent to a search backend.

Backends: a Serper-compatible HTTP API (configurable base URL and key) and a local JSONL collection of
{title, text} searched with BM25, for offline use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from debate.calls import Structured, ask_structured, converse, load_json_object, load_prompt
from debate.config import SearchConfig
from debate.errors import EvidenceUnavailableError, InputError, ReplyUnusableError, UsageError, validation_problem
from debate.evidence._retrieval import BM25Retriever, RetrievalCache
from debate.llm import ChatClient
from debate.plugins import EvidenceCache, SearchBackend, SearchHit
from debate.retry import TRANSIENT_STATUS, retrying
from debate.sentences import split_sentences
from debate.types import Claim, Evidence, Usage

__all__ = [
    "NO_RESULT",
    "LocalCollectionSearch",
    "SearchEvidence",
    "SerperSearch",
    "factool_snippets",
    "generate_queries",
]


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in TRANSIENT_STATUS
    return isinstance(exc, httpx.TransportError)


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    return exc.response.headers if isinstance(exc, httpx.HTTPStatusError) else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}: {exc.response.text[:200]}"
    return f"{type(exc).__name__}: {exc}"


class SerperSearch:
    """POST {base_url}/search with X-API-KEY, as google.serper.dev does."""

    name = "serper"

    def __init__(self, config: SearchConfig) -> None:
        if config.api_key is None:
            raise UsageError("the serper search backend needs an API key (--search.api-key or SERPER_API_KEY)")
        self._config = config
        self._http = httpx.AsyncClient(
            base_url=config.base_url,
            timeout=config.timeout_s,
            headers={"X-API-KEY": config.api_key.get_secret_value(), "Content-Type": "application/json"},
        )

    async def search(self, query: str, k: int) -> list[SearchHit]:
        policy = retrying(
            attempts=self._config.max_attempts,
            initial_s=0.5,
            max_s=20.0,
            is_transient=_transient,
            headers_of=_headers,
            describe=_describe,
        )
        try:
            async for attempt in policy:
                with attempt:
                    # Factool reads the first 2k organic results (its snippet_cnt) to keep k snippets.
                    response = await self._http.post("/search", json={"q": query, "num": 2 * k})
                    response.raise_for_status()
        except (httpx.HTTPError, ValueError) as exc:
            raise EvidenceUnavailableError(
                f"search {query!r} at {self._config.base_url}: {_describe(exc)}", transient=_transient(exc)
            ) from exc
        try:
            body = response.json()
        except ValueError as exc:
            raise EvidenceUnavailableError(f"search {query!r}: the response is not JSON", transient=True) from exc
        return self._hits(body, k)

    @staticmethod
    def _hits(body: Any, k: int) -> list[SearchHit]:
        if not isinstance(body, dict):
            raise EvidenceUnavailableError("search response is not a JSON object", transient=True)
        return factool_snippets(body, k)

    async def aclose(self) -> None:
        await self._http.aclose()


NO_RESULT = "No good Google Search Result was found"
"""Factool's evidence when a search finds nothing."""


def _text(value: object) -> str:
    # Factool puts the value in its prompt as Python formats it (a highlighted snippet is a list).
    return value if isinstance(value, str) else str(value)


def factool_snippets(body: Mapping[str, Any], k: int) -> list[SearchHit]:
    """A Serper response as Factool reads it (factool.knowledge_qa.google_serper `_parse_results`, its snippet_cnt
    being 2k): an answer box's answer, else its snippet (line breaks as spaces), else its highlighted snippet, is the
    only evidence; otherwise the knowledge graph's "title: type", description and "attribute: value" lines, then
    each of the first 2k organic results' snippet and its "attribute: value" lines, cut to the first k; nothing
    found is Factool's placeholder. Sources Factool names "None" are named serper:answerBox, serper:knowledgeGraph
    and serper:none here."""
    box = body.get("answerBox")
    if box:
        box = box if isinstance(box, Mapping) else {}
        for field, clean in (("answer", False), ("snippet", True), ("snippetHighlighted", False)):
            if box.get(field):
                text = _text(box[field])
                snippet = text.replace("\n", " ") if clean else text
                return [SearchHit(title=_text(box.get("title", "answer box")), snippet=snippet, url="serper:answerBox")]
    hits: list[SearchHit] = []
    graph = body.get("knowledgeGraph")
    if graph and isinstance(graph, Mapping):
        title = graph.get("title")
        lines = [
            *([f"{title}: {graph['type']}"] if graph.get("type") else []),
            *([_text(graph["description"])] if graph.get("description") else []),
            *(f"{name}: {value}" for name, value in _attributes(graph)),
        ]
        hits.extend(SearchHit(title=_text(title), snippet=line, url="serper:knowledgeGraph") for line in lines)
    for result in (body.get("organic") or [])[: 2 * k]:
        if not isinstance(result, Mapping):
            continue
        link, title = _text(result.get("link", "")), _text(result.get("title", ""))
        if "snippet" in result:
            hits.append(SearchHit(title=title, snippet=_text(result["snippet"]), url=link))
        hits.extend(SearchHit(title=title, snippet=f"{name}: {value}", url=link) for name, value in _attributes(result))
    if not hits:
        return [SearchHit(title="", snippet=NO_RESULT, url="serper:none")]
    return hits[:k]


def _attributes(item: Mapping[str, Any]) -> list[tuple[str, Any]]:
    attributes = item.get("attributes")
    return list(attributes.items()) if isinstance(attributes, Mapping) else []


class LocalCollectionSearch:
    """A JSONL collection of {title, text}; BM25 over its sentences (each prefixed with its document title)."""

    name = "local"

    def __init__(self, config: SearchConfig) -> None:
        assert config.collection is not None  # checked by SearchConfig
        self._path = Path(config.collection)
        self._passages: list[tuple[int, str, str]] = []  # (document index, title, sentence)
        try:
            lines = self._path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InputError(f"search collection {self._path}: {exc.strerror}") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                doc = _CollectionDoc.model_validate_json(line)
            except ValidationError as exc:
                problem = validation_problem(exc, "line")
                raise InputError(f"search collection {self._path} line {number}: {problem}") from exc
            for sentence in split_sentences(doc.text):
                self._passages.append((number, doc.title, sentence))
        self._retriever = BM25Retriever()
        self._texts = [f"{title}. {sentence}" for _, title, sentence in self._passages]

    async def search(self, query: str, k: int) -> list[SearchHit]:
        ranked = await asyncio.to_thread(self._retriever.rank, query, self._texts, k)
        return [
            SearchHit(
                title=self._passages[i][1],
                snippet=self._passages[i][2],
                url=f"{self._path}#line-{self._passages[i][0]}",
            )
            for i, score in ranked
            if score > 0
        ]

    async def aclose(self) -> None:
        return None


class _CollectionDoc(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str
    text: str


_QUERIES_FORMAT = 'a JSON object {"queries": ["<query 1>", "<query 2>"]}'


def _parse_queries(reply: str, n: int) -> list[str]:
    try:
        raw = load_json_object(reply)
    except ReplyUnusableError:
        raise
    queries = raw.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ReplyUnusableError('"queries" must be a list of strings')
    cleaned = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    if not cleaned:
        raise ReplyUnusableError('"queries" is empty')
    return cleaned[:n]


async def generate_queries(
    client: ChatClient,
    claim: Claim,
    *,
    n: int,
    max_retries: int,
    prompts_dir: str | None = None,
    prompt_name: str = "factool_queries",
) -> tuple[Structured[list[str]], Usage]:
    """`n` search queries for `claim` (Factool's prompt by default), re-asked up to `max_retries` times when the
    reply is unusable; the outcome says whether queries were obtained."""
    prompt = load_prompt(prompt_name, prompts_dir)
    system, user = prompt.render(claim=claim.text)
    chat = converse(client, system, schema=_QUERIES_SCHEMA, schema_name="queries", purpose="queries")
    outcome = await ask_structured(
        chat, user, lambda r: _parse_queries(r, n), max_retries=max_retries, expected=_QUERIES_FORMAT
    )
    return outcome, outcome.usage


_QUERIES_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "queries": {"type": "array", "items": {"type": "string", "maxLength": 200}, "minItems": 1, "maxItems": 5}
    },
    "required": ["queries"],
}


class SearchEvidence:
    """EvidenceSource: Factool-style queries for the claim, then their search results."""

    def __init__(
        self,
        *,
        client: ChatClient,
        backend: SearchBackend,
        config: SearchConfig,
        cache: EvidenceCache,
        max_retries: int,
        prompts_dir: str | None = None,
    ) -> None:
        self._client = client
        self._backend = backend
        self._config = config
        self._cache = cache
        self._max_retries = max_retries
        self._prompts_dir = prompts_dir

    async def evidence(self, claim: Claim) -> tuple[list[Evidence], Usage]:
        config = self._config
        outcome, usage = await generate_queries(
            self._client,
            claim,
            n=config.queries_per_claim,
            max_retries=self._max_retries,
            prompts_dir=self._prompts_dir,
            prompt_name=config.queries_prompt,
        )
        queries = outcome.unwrap()
        evidence: list[Evidence] = []
        seen: set[str] = set()  # only with `dedupe` (a named variant): Factool keeps every query's snippets
        for query in queries:
            key = RetrievalCache.key(
                "search", self._backend.name, config.base_url, config.collection, config.results_per_query, query
            )
            hits = self._cache.get(key)
            if hits is None:
                found = await self._backend.search(query, config.results_per_query)
                hits = [Evidence(text=h.snippet, source=h.url, kind="search", query=query) for h in found]
                self._cache.put(key, hits)
            for item in hits:
                if not config.dedupe or item.text not in seen:
                    seen.add(item.text)
                    evidence.append(item)
        return evidence, usage
