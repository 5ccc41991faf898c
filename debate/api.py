"""The Python API: `Verifier` for many calls with one client; `verify` / `averify` for one response."""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from debate.chain import MarkovChain
from debate.concurrency import gather_ordered
from debate.config import ModelConfig, VerifierConfig
from debate.llm import ChatClient
from debate.llm.embedded import EMBEDDED_MODEL_NAME, EmbeddedServer
from debate.llm.openai_client import OpenAIChatClient
from debate.registry import TeamFactory, load_team_factory
from debate.runner import run_debate
from debate.termination import paper_termination
from debate.types import Claim, ClaimVerdict, Evidence, Report, ReportVerdict, RunMeta, Usage

__all__ = ["Verifier", "averify", "qa_claim", "rollup_any_false", "verify"]

log = logging.getLogger(__name__)

Task = Literal["qa"]


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


def qa_claim(*, question: str | None, answer: str) -> Claim:
    """HaluEval-QA setting: the question and answer together are the one claim."""
    text = f"Question: {question.strip()}\nAnswer: {answer.strip()}" if question else answer.strip()
    return Claim(id="c0", text=text, kind="qa_pair")


def rollup_any_false(claims: Sequence[ClaimVerdict]) -> tuple[bool | None, ReportVerdict]:
    """The paper's rule: any false claim makes the response non-factual; an unverifiable claim is never factual."""
    if any(c.factual is False for c in claims):
        return False, "non_factual"
    if any(c.status == "unverifiable" for c in claims) or not claims:
        return None, "unverifiable"
    return True, "factual"


def _as_evidence(reference: str | Sequence[Evidence] | None, source: str | None) -> list[Evidence]:
    if reference is None:
        return []
    if isinstance(reference, str):
        return [Evidence(text=reference.strip(), source=source, kind="given")] if reference.strip() else []
    return list(reference)


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
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
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
            prompts=self._team_factory.prompt_hashes(),
            seed=self._model_config.seed,
            package_version=_package_version(),
            git_commit=_git_commit(),
            created_at=datetime.now(UTC),
        )

    async def verify_claim(self, claim: Claim, evidence: Sequence[Evidence]) -> ClaimVerdict:
        """Debate one claim. Model failures end as `unverifiable` with the reason; fatal endpoint errors raise."""
        team = self._team_factory.new_team(client=self.client, config=self.config.debate)
        result = await run_debate(
            claim=claim, evidence=list(evidence), team=team, chain=self._chain, termination=self._termination
        )
        if result.final is None:
            return ClaimVerdict(
                claim_id=claim.id,
                text=claim.text,
                status="unverifiable",
                factual=None,
                reason=result.failure or "the debate produced no verdict",
                evidence=list(evidence),
                debate=result,
                usage=result.usage,
            )
        return ClaimVerdict(
            claim_id=claim.id,
            text=claim.text,
            status="verified",
            factual=result.final.factuality,
            error_severity=result.final.error_severity,
            evidence=list(evidence),
            debate=result,
            usage=result.usage,
        )

    async def verify(
        self,
        response: str,
        *,
        question: str | None = None,
        reference: str | Sequence[Evidence] | None = None,
        task: Task = "qa",
        reference_source: str | None = None,
    ) -> Report:
        """Verify one response. For task `qa`, question + response form one claim and `reference` is the evidence."""
        if task != "qa":
            raise ValueError(f"unknown task {task!r}; supported: qa")
        if not response.strip():
            raise ValueError("response is empty")
        started = time.perf_counter()
        claims = [qa_claim(question=question, answer=response)]
        evidence = _as_evidence(reference, reference_source)
        verdicts = await gather_ordered(claims, lambda c: self.verify_claim(c, evidence), limit=self.config.concurrency)
        factual, verdict = rollup_any_false(verdicts)
        return Report(
            task=task,
            question=question,
            response=response,
            factual=factual,
            verdict=verdict,
            claims=verdicts,
            usage=Usage.total(v.usage for v in verdicts),
            elapsed_s=time.perf_counter() - started,
            meta=self.meta(),
        )


async def averify(
    response: str,
    *,
    question: str | None = None,
    reference: str | Sequence[Evidence] | None = None,
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
    reference: str | Sequence[Evidence] | None = None,
    task: Task = "qa",
    config: VerifierConfig | None = None,
) -> Report:
    """Synchronous `averify`."""
    return asyncio.run(averify(response, question=question, reference=reference, task=task, config=config))
