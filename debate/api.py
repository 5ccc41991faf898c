"""The Python API: `Verifier` for many calls with one client; `verify` / `averify` for one response."""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import Self, get_args

from debate.cascade import Cascade, cited_sources, sources_from
from debate.chain import MarkovChain
from debate.claims import Extraction, LLMClaimExtractor, SubjectiveFilter, qa_claim, rag_claims
from debate.concurrency import gather_ordered
from debate.config import ModelConfig, VerifierConfig
from debate.llm import ChatClient
from debate.llm.cache import CachingChatClient
from debate.llm.embedded import EMBEDDED_MODEL_NAME, EmbeddedServer
from debate.llm.openai_client import OpenAIChatClient
from debate.registry import TeamFactory, load_team_factory
from debate.retrieval import RETRIEVERS, RetrievalCache, Retriever, document_evidence
from debate.rollup import claim_ratios, response_score, roll_up
from debate.runner import run_debate
from debate.search import SearchBackend, SearchError, make_search_backend, search_evidence
from debate.termination import paper_termination
from debate.types import Claim, ClaimVerdict, Evidence, ExtractionInfo, Report, RunMeta, Source, Task, Usage

__all__ = ["TASKS", "Verifier", "averify", "verify"]

log = logging.getLogger(__name__)

TASKS: tuple[Task, ...] = get_args(Task)


@functools.cache
def _git_commit() -> str | None:
    """The commit of the checkout this package runs from, if any."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def _package_version() -> str:
    try:
        return version("markov-debate")
    except PackageNotFoundError:
        return "unknown"


Reference = str | Sequence[Evidence] | Sequence[Source] | Mapping[str, str]
"""Knowledge text, a document, evidence items, or RAG sources ({id: text} or Source items)."""


def _as_evidence(reference: Reference | None, source: str | None) -> list[Evidence]:
    if reference is None:
        return []
    if isinstance(reference, str):
        return [Evidence(text=reference.strip(), source=source, kind="given")] if reference.strip() else []
    if isinstance(reference, Mapping):
        return [Evidence(text=str(text), source=str(sid), kind="given") for sid, text in reference.items()]
    return [item if isinstance(item, Evidence) else Evidence(text=item.text, source=item.id) for item in reference]


def _dialogue_evidence(reference: Reference | None, source: str | None, history: str | None) -> list[Evidence]:
    """The knowledge, then the dialogue history, which is evidence too."""
    given = _as_evidence(reference, source)
    if history and history.strip():
        given.append(Evidence(text=history.strip(), source="dialogue_history", kind="dialogue_history"))
    return given


def _as_document(reference: Reference | None) -> str | None:
    if reference is None:
        return None
    text = reference if isinstance(reference, str) else "\n".join(e.text for e in _as_evidence(reference, None))
    return text if text.strip() else None


@dataclass
class _Plan:
    """What a task needs: its claims and how each claim gets its evidence."""

    claims: list[Claim]
    extraction: ExtractionInfo
    evidence: Callable[[Claim], Awaitable[tuple[list[Evidence], Usage, str | None]]]
    notes: list[str]
    sources: list[Source] | None = None
    """RAG sources, when the task has them."""


class Verifier:
    """One model client, one chain, one team factory, reused across many responses. Use as an async context."""

    def __init__(
        self,
        *,
        config: VerifierConfig | None = None,
        client: ChatClient | None = None,
        team_factory: TeamFactory | None = None,
        prompts_dir: str | None = None,
    ) -> None:
        self.config = config or VerifierConfig()
        self._client = client
        self._owns_client = client is None
        self._server: EmbeddedServer | None = None
        self._model_config: ModelConfig = self.config.model
        self._team_factory = team_factory or load_team_factory(self.config.team, prompts_dir=prompts_dir)
        self._chain = MarkovChain.build(self.config.debate.transition)
        self._termination = paper_termination(
            min_rounds=self.config.debate.min_rounds, max_rounds=self.config.debate.max_rounds
        )
        self.cache = RetrievalCache(directory=self.config.retrieval.cache_dir)
        self._retriever_instance: Retriever | None = None
        self._search_backend: SearchBackend | None = None
        self._cascade: Cascade | None = None

    @property
    def client(self) -> ChatClient:
        if self._client is None:
            raise RuntimeError("Verifier is not started; use `async with Verifier(...) as v:`")
        return self._client

    @property
    def embedded(self) -> bool:
        return self._server is not None

    async def __aenter__(self) -> Self:
        if self._client is None:
            model_config = self.config.model
            if model_config.base_url is None:
                self._server = EmbeddedServer()
                await self._server.__aenter__()
                model_config = model_config.model_copy(
                    update={
                        "base_url": self._server.base_url,
                        "model": EMBEDDED_MODEL_NAME,
                        # llama.cpp rejects json_schema; its own json_object+schema form constrains decoding.
                        "structured_output": "json_object"
                        if model_config.structured_output == "auto"
                        else model_config.structured_output,
                        # One model instance answers one request at a time; more in flight only queue.
                        "max_concurrency": 1,
                    }
                )
            try:
                client = OpenAIChatClient(config=model_config)
                await client.resolve_model()
            except BaseException:
                await self._stop_server()
                raise
            self._client = client
            self._model_config = model_config.model_copy(update={"model": client.model_name})
        if self.config.call_cache is not None:
            settings = self._model_config.model_dump(mode="json", include={"temperature", "max_tokens", "seed"})
            self._client = CachingChatClient(
                self.client, path=self.config.call_cache, settings=settings, owns_inner=self._owns_client
            )
            self._owns_client = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._search_backend is not None:
                await self._search_backend.aclose()
                self._search_backend = None
            if self._owns_client and self._client is not None:
                await self._client.aclose()
                self._client = None
        finally:
            await self._stop_server()

    async def _stop_server(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.__aexit__(None, None, None)

    def meta(self) -> RunMeta:
        """The reproducibility record attached to every report."""
        resolved = self.config.model_copy(update={"model": self._model_config})
        return RunMeta(
            model=self.client.model_name,
            base_url=self._model_config.base_url,
            embedded=self.embedded,
            config=resolved.model_dump(mode="json"),
            prompts={
                **self._team_factory.prompt_hashes(),
                **({"grounding": self.cascade.prompt_hash} if self.cascade.enabled else {}),
            },
            seed=self._model_config.seed,
            package_version=_package_version(),
            git_commit=_git_commit(),
            created_at=datetime.now(UTC),
        )

    async def verify_claim(
        self, claim: Claim, evidence: Sequence[Evidence], *, extra_usage: Usage | None = None
    ) -> ClaimVerdict:
        """Debate one claim. Model failures end as `unverifiable` with the reason; fatal endpoint errors raise."""
        team = self._team_factory.new_team(client=self.client, config=self.config.debate)
        result = await run_debate(
            claim=claim, evidence=list(evidence), team=team, chain=self._chain, termination=self._termination
        )
        usage = result.usage + (extra_usage or Usage())
        if result.final is None:
            reason = result.failure or "the debate produced no verdict"
            return ClaimVerdict.unverifiable(claim, reason, evidence=list(evidence), debate=result, usage=usage)
        return ClaimVerdict.verified(claim, result.final, evidence=list(evidence), debate=result, usage=usage)

    async def _claim_with_evidence(self, index: int, claim: Claim, plan: _Plan) -> ClaimVerdict:
        evidence, usage, failure = await plan.evidence(claim)
        if failure is not None:
            reason = f"evidence retrieval failed: {failure}"
            return ClaimVerdict.unverifiable(claim, reason, evidence=evidence, debate=None, usage=usage)
        decisions, decided = await self.cascade.run(claim, index, evidence, plan.sources)
        usage = usage + Usage.total(d.usage for d in decisions)
        if decided is not None:
            return ClaimVerdict.verified(
                claim, decided.opinion, evidence=evidence, debate=None, usage=usage,
                decided_by=decided.by, prefilters=decisions,
            )  # fmt: skip
        verdict = await self.verify_claim(claim, evidence, extra_usage=usage)
        return verdict.model_copy(update={"prefilters": decisions}) if decisions else verdict

    @property
    def cascade(self) -> Cascade:
        if self._cascade is None:
            self._cascade = Cascade(
                client=self.client, config=self.config.prefilter, min_rounds=self.config.debate.min_rounds
            )
        return self._cascade

    def _retriever(self) -> Retriever:
        if self._retriever_instance is None:
            self._retriever_instance = RETRIEVERS[self.config.retrieval.retriever]()
        return self._retriever_instance

    def _document_source(
        self, document: str, k: int
    ) -> Callable[[Claim], Awaitable[tuple[list[Evidence], Usage, str | None]]]:
        retriever = self._retriever()
        source = "document:" + RetrievalCache.key(document)[:12]

        async def fetch(claim: Claim) -> tuple[list[Evidence], Usage, str | None]:
            items = await document_evidence(claim, document, retriever=retriever, k=k, source=source, cache=self.cache)
            return items, Usage(), None

        return fetch

    def _search_source(self) -> Callable[[Claim], Awaitable[tuple[list[Evidence], Usage, str | None]]]:
        search = self.config.search
        assert search is not None
        if self._search_backend is None:
            self._search_backend = make_search_backend(search)
        backend = self._search_backend

        async def fetch(claim: Claim) -> tuple[list[Evidence], Usage, str | None]:
            try:
                return await search_evidence(
                    claim,
                    client=self.client,
                    backend=backend,
                    config=search,
                    cache=self.cache,
                    max_retries=self.config.claims.max_parse_retries,
                )
            except SearchError as exc:
                return [], Usage(), str(exc)

        return fetch

    async def _plan(
        self, task: Task, response: str, question: str | None, reference: Reference | None,
        reference_source: str | None, claims: Sequence[str] | None = None,
    ) -> _Plan:  # fmt: skip
        cfg = self.config.claims
        given_claims: Extraction | None = None
        if claims is not None:
            texts = [t.strip() for t in claims if t.strip()]
            given_claims = Extraction(
                claims=[Claim(id=f"c{i}", text=t, kind="atomic") for i, t in enumerate(texts)],
                info=ExtractionInfo(method="given"),
            )
        extractor = LLMClaimExtractor(
            self.client, format=cfg.format, max_claims=cfg.max_claims, max_retries=cfg.max_parse_retries
        )
        notes: list[str] = []

        if task == "rag":
            if reference is None or isinstance(reference, str):
                raise ValueError("task rag needs the sources as `reference`: {id: text} or [{id, text, parent_id}]")
            sources = sources_from(reference)  # type: ignore[arg-type]
            return _Plan(rag_claims(response), ExtractionInfo(method="rag-sentences"), _cited(sources), notes, sources)

        if task == "qa":
            given = _as_evidence(reference, reference_source)
            if given_claims is not None:
                return _Plan(given_claims.claims, given_claims.info, _fixed(given), notes)
            return _Plan([qa_claim(question=question, answer=response)], ExtractionInfo(method="qa-pair"),
                         _fixed(given), notes)  # fmt: skip

        if task == "dialogue" and given_claims is None:
            filtered = await SubjectiveFilter(self.client, max_retries=cfg.max_parse_retries).filter(
                response, history=question
            )
            given = _dialogue_evidence(reference, reference_source, question)
            if filtered.text is None:
                info = filtered.info.model_copy(update={"filtered_response": None})
                notes.append("nothing factual is left after removing subjective content")
                return _Plan([], info, _fixed(given), notes)
            extraction = await extractor.extract(filtered.text, context=question)
            info = extraction.info.model_copy(
                update={
                    "method": f"subjective-filter+{extraction.info.method}",
                    "prompts": {**filtered.info.prompts, **extraction.info.prompts},
                    "attempts": filtered.info.attempts + extraction.info.attempts,
                    "parse_errors": filtered.info.parse_errors + extraction.info.parse_errors,
                    "usage": filtered.info.usage + extraction.info.usage,
                    "filtered_response": filtered.text,
                }
            )
            return _Plan(extraction.claims, info, _fixed(given), notes + extraction.notes)

        if task == "dialogue":
            assert given_claims is not None
            given = _dialogue_evidence(reference, reference_source, question)
            return _Plan(given_claims.claims, given_claims.info, _fixed(given), notes)

        document = _as_document(reference)
        if task == "summarization" and document is None:
            raise ValueError("task summarization needs the source document as `reference`")
        extraction = given_claims or await extractor.extract(response, context=question)
        notes.extend(extraction.notes)
        if document is not None:
            fetch = self._document_source(document, self.config.retrieval.top_k)
        elif self.config.search is not None:
            fetch = self._search_source()
        else:
            notes.append("no reference and no search backend: claims were judged from the model's own knowledge")
            fetch = _fixed([])
        return _Plan(extraction.claims, extraction.info, fetch, notes)

    async def verify(
        self,
        response: str,
        *,
        question: str | None = None,
        reference: Reference | None = None,
        task: Task = "qa",
        reference_source: str | None = None,
        claims: Sequence[str] | None = None,
    ) -> Report:
        """Verify one response.

        qa: `question` + `response` form one claim; `reference` is the knowledge.
        summarization: `reference` is the source document; claims get its top-k sentences.
        dialogue: `question` is the dialogue history (also evidence), `reference` the knowledge.
        kbqa / general: claims get the top-k sentences of `reference` when given, else search results when a
        search backend is configured, else no evidence (knowledge-free, said in the report's note).
        Raises ExtractionError when the claims of the response cannot be obtained.
        """
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
        if not response.strip():
            raise ValueError("response is empty")
        started = time.perf_counter()
        plan = await self._plan(task, response, question, reference, reference_source, claims)
        verdicts = await gather_ordered(
            list(enumerate(plan.claims)), lambda ic: self._claim_with_evidence(*ic, plan), limit=self.config.concurrency
        )
        outcome = roll_up(verdicts, rule=self.config.rollup, soft_threshold=self.config.soft_threshold)
        notes = [*plan.notes, *([outcome.note] if outcome.note else [])]
        return Report(
            task=task,
            question=question,
            response=response,
            factual=outcome.factual,
            verdict=outcome.verdict,
            rollup=self.config.rollup,
            score=response_score(verdicts),
            ratios=claim_ratios(verdicts),
            note="; ".join(notes) or None,
            extraction=plan.extraction,
            prefilter=self.cascade.summary(verdicts, response=response, sources=plan.sources),
            claims=verdicts,
            usage=plan.extraction.usage + Usage.total(v.usage for v in verdicts),
            elapsed_s=time.perf_counter() - started,
            meta=self.meta(),
        )


def _cited(sources: list[Source]) -> Callable[[Claim], Awaitable[tuple[list[Evidence], Usage, str | None]]]:
    """A RAG claim's evidence: the sources it cites (by id or parent id), or all sources when it cites none."""

    async def fetch(claim: Claim) -> tuple[list[Evidence], Usage, str | None]:
        chosen = cited_sources(sources, claim) or sources
        return [Evidence(text=s.text, source=s.id, kind="given") for s in chosen], Usage(), None

    return fetch


def _fixed(evidence: list[Evidence]) -> Callable[[Claim], Awaitable[tuple[list[Evidence], Usage, str | None]]]:
    async def fetch(claim: Claim) -> tuple[list[Evidence], Usage, str | None]:
        return list(evidence), Usage(), None

    return fetch


async def averify(
    response: str,
    *,
    question: str | None = None,
    reference: Reference | None = None,
    task: Task = "qa",
    config: VerifierConfig | None = None,
) -> Report:
    """Verify one response with a short-lived Verifier (starts the embedded model when no endpoint is set)."""
    async with Verifier(config=config) as verifier:
        return await verifier.verify(response, question=question, reference=reference, task=task)


def verify(
    response: str,
    *,
    question: str | None = None,
    reference: Reference | None = None,
    task: Task = "qa",
    config: VerifierConfig | None = None,
) -> Report:
    """Synchronous `averify`."""
    return asyncio.run(averify(response, question=question, reference=reference, task=task, config=config))
