"""The Python API: `Verifier` for many calls with one client; `verify` / `averify` for one response.

The Verifier only orchestrates the registered stages (debate.stages):

    plan (task) -> evidence -> prefilters (config order) -> debate (team over the chain) -> rollup -> Report

Each stage's failure becomes a typed `Failure` on its claim (evidence, prefilter, debate) or on the response (the
plan: claim extraction, the subjective filter); other claims and other responses go on. Two things are raised
instead: `InputError` (the caller's item is malformed) and a fatal `ModelRequestError` (401/403/404: every further
call would fail the same way).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from debate.chain import MarkovChain, load_chain
from debate.concurrency import gather_ordered
from debate.config import ModelConfig, VerifierConfig
from debate.errors import DebateError, InputError, ModelRequestError
from debate.llm import ChatClient
from debate.llm.cache import CachingChatClient
from debate.llm.embedded import EMBEDDED_MODEL_NAME, EmbeddedServer
from debate.llm.openai_client import OpenAIChatClient
from debate.provenance import git_commit, package_version
from debate.retrieval import RetrievalCache
from debate.rollup import claim_ratios, response_score, roll_up
from debate.spans import ground_claims
from debate.stages import (
    PREFILTERS,
    RETRIEVERS,
    SEARCH_BACKENDS,
    TASKS,
    TEAMS,
    Plan,
    Prefilter,
    Reference,
    Retriever,
    SearchBackend,
    Task,
    TaskInput,
    TeamFactory,
)
from debate.types import (
    Claim,
    ClaimVerdict,
    Evidence,
    ExtractionInfo,
    Failure,
    Opinion,
    PrefilterDecision,
    PrefilterSummary,
    Report,
    ResponseCheck,
    RiskLevel,
    RunMeta,
    Usage,
)

__all__ = ["Verifier", "VerifierJob", "averify", "verify"]

log = logging.getLogger(__name__)


T = TypeVar("T")
R = TypeVar("R")

_RISK_ORDER: tuple[RiskLevel, ...] = ("none", "low", "moderate", "high")


def _fatal(exc: BaseException) -> bool:
    return isinstance(exc, ModelRequestError) and exc.fatal


class Verifier:
    """One model client, one chain, one team factory, reused across many responses. Use as an async context."""

    def __init__(
        self,
        *,
        config: VerifierConfig | None = None,
        client: ChatClient | None = None,
        team_factory: TeamFactory | None = None,
        prompts_dir: str | None = None,
        attached_embedded: bool = False,
    ) -> None:
        """`attached_embedded`: the configured base_url is an embedded server another process started (--workers),
        so reports and the call cache name the embedded model, not its loopback port."""
        self.config = config or VerifierConfig()
        self._attached_embedded = attached_embedded
        self._client = client
        self._owns_client = client is None
        self._server: EmbeddedServer | None = None
        self._model_config: ModelConfig = self.config.model
        self._prompts_dir = prompts_dir or self.config.prompt_set
        self.chain: MarkovChain = load_chain(self.config.debate.chain)
        self._team_factory = team_factory or TEAMS.get(self.config.team)(prompts_dir=self._prompts_dir)
        self.cache = RetrievalCache(directory=self.config.retrieval.cache_dir)
        self._retriever: Retriever | None = None
        self._search_backend: SearchBackend | None = None
        self._tasks: dict[str, Task] = {}
        self._prefilters: list[Prefilter] | None = None
        # Prompt files are checked now, so a bad prompt set fails before any model starts.
        self._prompt_hashes = self._team_factory.prompt_hashes(self.chain)

    # --- StageContext -------------------------------------------------------------------------------------------

    @property
    def client(self) -> ChatClient:
        if self._client is None:
            raise RuntimeError("Verifier is not started; use `async with Verifier(...) as v:`")
        return self._client

    @property
    def prompts_dir(self) -> str | None:
        return self._prompts_dir

    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = RETRIEVERS.get(self.config.retrieval.retriever)()
        return self._retriever

    def search_backend(self) -> SearchBackend | None:
        if self.config.search is None:
            return None
        if self._search_backend is None:
            self._search_backend = SEARCH_BACKENDS.get(self.config.search.backend)(self.config.search)
        return self._search_backend

    # --- life cycle ---------------------------------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self._server is not None or self._attached_embedded

    def job(self, workers: int, handler: Callable[[Verifier], Callable[[T], Awaitable[R]]]) -> VerifierJob[T, R] | None:
        """The --workers job (debate.workers) running `handler`'s per-item work on up to `workers` processes over
        this started Verifier's endpoint; None when one process is all there is (one worker, or one model slot)."""
        configs = self.worker_configs(workers)
        return VerifierJob(configs, self.embedded, handler) if len(configs) > 1 else None

    def worker_configs(self, workers: int) -> list[VerifierConfig]:
        """This started Verifier's configuration for each of up to `workers` processes: the resolved endpoint and
        model (so no worker starts its own embedded model), with the model concurrency split between them so that
        together they send what one process would (one worker per slot at most)."""
        if self._client is None:
            raise RuntimeError("Verifier is not started; use `async with Verifier(...) as v:`")
        total = self._model_config.max_concurrency
        count = max(1, min(workers, total))
        shares = [total // count + (1 if k < total % count else 0) for k in range(count)]
        return [
            self.config.model_copy(update={"model": self._model_config.model_copy(update={"max_concurrency": share})})
            for share in shares
        ]

    async def __aenter__(self) -> Self:
        try:
            await self._start()
        except BaseException:
            # __aexit__ does not run when __aenter__ fails: release what was started (cancellation included).
            await self._close()
            raise
        return self

    async def _start(self) -> None:
        if self._client is None:
            model_config = self.config.model
            if model_config.base_url is None:
                self._server = EmbeddedServer()
                await self._server.astart()
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
            client = OpenAIChatClient(config=model_config)
            self._client = client
            await client.resolve_model()
            self._model_config = model_config.model_copy(update={"model": client.model_name})
        if self.config.call_cache is not None:
            settings = self._model_config.model_dump(
                mode="json", include={"temperature", "max_tokens", "seed", "structured_output"}
            )
            endpoint = self._model_config.base_url or "scripted"
            if self.embedded:
                endpoint = "embedded:" + EMBEDDED_MODEL_NAME  # its loopback port changes every start
            cached: ChatClient = CachingChatClient(
                self.client, path=self.config.call_cache, endpoint=endpoint, settings=settings,
                owns_inner=self._owns_client,
            )  # fmt: skip
            self._client = cached
            self._owns_client = True
        self._prefilters = [PREFILTERS.get(name)(self) for name in self.config.prefilter.prefilters]

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        try:
            if self._search_backend is not None:
                backend, self._search_backend = self._search_backend, None
                await backend.aclose()
            if self._owns_client and self._client is not None:
                client, self._client = self._client, None
                await client.aclose()
        finally:
            if self._server is not None:
                server, self._server = self._server, None
                server.stop()

    # --- reproducibility ----------------------------------------------------------------------------------------

    @property
    def prefilters(self) -> list[Prefilter]:
        if self._prefilters is None:
            raise RuntimeError("Verifier is not started; use `async with Verifier(...) as v:`")
        return self._prefilters

    def meta(self) -> RunMeta:
        """The reproducibility record attached to every report."""
        resolved = self.config.model_copy(update={"model": self._model_config})
        prompts = dict(self._prompt_hashes)
        for prefilter in self.prefilters:
            prompts |= prefilter.prompt_hashes()
        return RunMeta(
            model=self.client.model_name,
            base_url=self._model_config.base_url,
            embedded=self.embedded,
            config=resolved.model_dump(mode="json"),
            prompt_set=self._prompts_dir or "paper",
            prompts=prompts,
            seed=self._model_config.seed,
            package_version=package_version(),
            git_commit=git_commit(),
            created_at=datetime.now(UTC),
        )

    # --- the pipeline -------------------------------------------------------------------------------------------

    def task(self, name: str) -> Task:
        if name not in self._tasks:
            try:
                factory = TASKS.get(name)
            except LookupError as exc:
                raise InputError(str(exc)) from exc
            self._tasks[name] = factory()
        return self._tasks[name]

    async def verify_claim(self, claim: Claim, evidence: Sequence[Evidence], *, usage: Usage | None = None,
                           prefilters: list[PrefilterDecision] | None = None) -> ClaimVerdict:  # fmt: skip
        """Debate one claim over the chain. A failed debate ends `unverifiable` with its typed failure."""
        team = self._team_factory.new_team(client=self.client, config=self.config.debate, chain=self.chain)
        result = await team.debate(claim, list(evidence))
        total = result.usage + (usage or Usage())
        if result.final is None:
            failure = result.failure or Failure(kind="reply_unusable", message="no verdict", stage="debate")
            return ClaimVerdict.unverifiable(
                claim, failure, evidence=list(evidence), debate=result, usage=total, prefilters=prefilters
            )
        return ClaimVerdict.verified(
            claim, result.final, evidence=list(evidence), debate=result, usage=total, prefilters=prefilters
        )

    async def _claim(self, index: int, claim: Claim, plan: Plan, risk: RiskLevel) -> ClaimVerdict:
        try:
            evidence, usage = await plan.evidence.evidence(claim)
        except DebateError as exc:
            if _fatal(exc):
                raise
            failure = Failure.from_error(exc, "evidence")
            return ClaimVerdict.unverifiable(claim, failure, evidence=[], debate=None, usage=Usage())
        decisions: list[PrefilterDecision] = []
        for prefilter in self.prefilters:
            try:
                decision = await prefilter.check(claim, index, evidence, plan)
            except DebateError as exc:
                if _fatal(exc):
                    raise
                failure = Failure.from_error(exc, f"prefilter:{prefilter.name}")
                return ClaimVerdict.unverifiable(
                    claim, failure, evidence=evidence, debate=None, usage=usage, prefilters=decisions
                )
            if decision.decision == "factual" and risk == "high":
                # A high-risk answer is never cleared claim by claim without a debate.
                decision = decision.model_copy(
                    update={"decision": "pass", "reason": f"{decision.reason}; not decided: the response's risk is "
                            "high", "error_severity": None}
                )  # fmt: skip
            decisions.append(decision)
            usage = usage + decision.usage
            if decision.decision in ("factual", "non_factual"):
                opinion = Opinion(
                    opinion=decision.reason,
                    factuality=decision.decision == "factual",
                    error_severity=decision.error_severity if decision.error_severity is not None else 0,
                )
                return ClaimVerdict.verified(
                    claim, opinion, evidence=evidence, debate=None, usage=usage,
                    decided_by=f"prefilter:{prefilter.name}", prefilters=decisions,
                )  # fmt: skip
        return await self.verify_claim(claim, evidence, usage=usage, prefilters=decisions)

    def _prefilter_summary(
        self, verdicts: Sequence[ClaimVerdict], plan: Plan, before: list[ResponseCheck], risk: RiskLevel
    ) -> PrefilterSummary:
        after = [c for p in self.prefilters if (c := p.summarize(verdicts, plan)) is not None]
        notes = [note for p in self.prefilters if (note := p.note()) is not None]
        decided = sum(1 for c in verdicts if c.decided_by != "debate")
        calls = Usage.total([*(d.usage for c in verdicts for d in c.prefilters), *(c.usage for c in before)]).llm_calls
        saved = decided * (1 + 3 * self.config.debate.min_rounds)
        return PrefilterSummary(
            prefilters=[p.name for p in self.prefilters],
            checks=[*before, *after],
            risk_level=risk,
            decided=decided,
            prefilter_calls=calls,
            debate_calls_saved=saved,
            net_calls_saved=saved - calls,
            note="; ".join(notes) or None,
        )

    async def verify(
        self,
        response: str,
        *,
        question: str | None = None,
        reference: Reference | None = None,
        task: str = "qa",
        reference_source: str | None = None,
        claims: Sequence[str] | None = None,
    ) -> Report:
        """Verify one response.

        qa: `question` + `response` form one claim; `reference` is the knowledge.
        summarization: `reference` is the source document; claims get its top-k sentences.
        dialogue: `question` is the dialogue history (also evidence), `reference` the knowledge.
        kbqa / general: claims get the top-k sentences of `reference` when given, else search results when a
        search backend is configured, else no evidence (knowledge-free, said in the report's note).
        rag: `reference` is the sources ({id: text} or [{id, text, parent_id}]).
        Raises InputError for a malformed item (unknown task, empty response, a task's missing reference).
        """
        if not response.strip():
            raise InputError("response is empty")
        started = time.perf_counter()
        item = TaskInput(
            response=response, question=question, reference=reference, reference_source=reference_source,
            claims=claims,
        )  # fmt: skip
        try:
            plan = await self.task(task).plan(item, self)
        except InputError:
            raise
        except DebateError as exc:
            if _fatal(exc):
                raise
            return self._failed_report(task, item, Failure.from_error(exc, "extraction"), started)
        plan.question = question
        # Claims are grounded in the response before anyone judges them (the caller's own claims are never dropped).
        grounded = ground_claims(plan.claims, response, may_drop=plan.extraction.method != "given")
        plan.claims = grounded.claims
        if grounded.dropped:
            plan.extraction = plan.extraction.model_copy(update={"dropped": grounded.dropped})
            plan.notes.append(
                f"{len(grounded.dropped)} extracted claim(s) dropped: nothing in the response supports them"
            )
        checks: list[ResponseCheck] = []
        for prefilter in self.prefilters:
            try:
                check = await prefilter.check_response(response, plan)
            except DebateError as exc:
                if _fatal(exc):
                    raise
                return self._failed_report(task, item, Failure.from_error(exc, f"prefilter:{prefilter.name}"), started)
            if check is not None:
                checks.append(check)
        risk: RiskLevel = max((c.risk_level for c in checks), key=_RISK_ORDER.index, default="none")
        verdicts = await gather_ordered(
            list(enumerate(plan.claims)), lambda ic: self._claim(*ic, plan, risk), limit=self.config.claim_concurrency
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
            prefilter=self._prefilter_summary(verdicts, plan, checks, risk) if self.prefilters else None,
            claims=verdicts,
            usage=plan.extraction.usage + Usage.total(v.usage for v in verdicts),
            elapsed_s=time.perf_counter() - started,
            meta=self.meta(),
        )

    def _failed_report(self, task: str, item: TaskInput, failure: Failure, started: float) -> Report:
        return Report(
            task=task,
            question=item.question,
            response=item.response,
            factual=None,
            verdict="unverifiable",
            rollup=self.config.rollup,
            score=None,
            ratios=claim_ratios([]),
            note=f"no claims were judged: {failure.message}",
            failure=failure,
            extraction=ExtractionInfo(method="failed"),
            claims=[],
            usage=Usage(),
            elapsed_s=time.perf_counter() - started,
            meta=self.meta(),
        )


async def averify(
    response: str,
    *,
    question: str | None = None,
    reference: Reference | None = None,
    task: str = "qa",
    config: VerifierConfig | None = None,
) -> Report:
    """Verify one response with a short-lived Verifier. Without `config`, the endpoint comes from the environment
    (OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL), as for the command line; with none set, the embedded model is
    started (and said so in the log)."""
    config = config or VerifierConfig(model=ModelConfig.from_env())
    async with Verifier(config=config) as verifier:
        return await verifier.verify(response, question=question, reference=reference, task=task)


def verify(
    response: str,
    *,
    question: str | None = None,
    reference: Reference | None = None,
    task: str = "qa",
    config: VerifierConfig | None = None,
) -> Report:
    """Synchronous `averify`. Inside a running event loop (Jupyter, IPython), where `asyncio.run` cannot be called,
    it runs in a worker thread with its own loop and blocks until done; in your own async code, `await averify(...)`
    instead. Without an endpoint (`config.model.base_url`), the embedded model is started first (logged)."""
    return run_blocking(averify(response, question=question, reference=reference, task=task, config=config))


def run_blocking(work: Coroutine[Any, Any, R]) -> R:
    """Run a coroutine to completion from synchronous code: `asyncio.run` normally; inside a running event loop
    (Jupyter, an async test), on a worker thread with its own loop, blocking until it is done."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    log.info("called inside a running event loop: running in a worker thread (await the async form to avoid)")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="debate-sync") as pool:
        return pool.submit(asyncio.run, work).result()


@dataclass(frozen=True)
class VerifierJob(Generic[T, R]):
    """A picklable --workers job (see debate.workers): each worker process opens its own Verifier on its share of
    the parent's resolved configuration and makes its per-item handler with `handler(verifier)` (a module-level
    function, or a functools.partial of one, so that it pickles)."""

    configs: list[VerifierConfig]
    """One configuration per worker: the parent's endpoint and model, a share of the model concurrency."""
    embedded: bool
    """The endpoint is the embedded model the parent started."""
    handler: Callable[[Verifier], Callable[[T], Awaitable[R]]]
    """Makes the per-item work from a started Verifier."""

    @property
    def workers(self) -> int:
        return len(self.configs)

    @asynccontextmanager
    async def open(self, worker: int) -> AsyncIterator[Callable[[T], Awaitable[R]]]:
        async with Verifier(config=self.configs[worker], attached_embedded=self.embedded) as verifier:
            yield self.handler(verifier)
