"""The Python API: `Verifier` for many calls with one client; `verify` / `averify` for one response.

A Verifier is a front over its `Runtime` (debate.pipeline: the client, the embedded model, shared resources, the
run's record) and its `Pipeline` (debate.pipeline._run: plan -> prefilter cascade -> debate -> rollup -> Report).
Each stage's failure becomes a typed `Failure` on its claim or response; other claims and other responses go on.
Two things are raised instead: `InputError` (the caller's item is malformed) and a fatal `ModelRequestError`
(401/403/404: every further call would fail the same way).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from debate.calibration import Calibration, LiveCalibration
from debate.concurrency import run_blocking
from debate.config import ModelConfig, VerifierConfig
from debate.engine import MarkovChain, load_chain
from debate.errors import InputError
from debate.llm import ChatClient
from debate.pipeline._choose import Chooser
from debate.pipeline._escalate import Escalation
from debate.pipeline._run import Pipeline, checked_input
from debate.pipeline._runtime import Runtime
from debate.plugins import TEAMS, TaskInput, TeamFactory, check_config
from debate.types import Claim, ClaimVerdict, Evidence, PrefilterDecision, Report, RunMeta, Usage, stop_kind

__all__ = ["Verifier", "VerifierJob", "averify", "run_blocking", "verify"]

log = logging.getLogger(__name__)


T = TypeVar("T")
R = TypeVar("R")


class Verifier:
    """One model client, one chain, one team factory, reused across many responses. Use as an async context.

    A thin front: the `Runtime` owns the resources (and is what every stage receives), the `Pipeline` verifies."""

    def __init__(
        self,
        *,
        config: VerifierConfig | None = None,
        client: ChatClient | None = None,
        team_factory: TeamFactory | None = None,
        prompts_dir: str | None = None,
        attached_embedded: bool = False,
        role_clients: Mapping[str, ChatClient] | None = None,
        cascade_clients: Mapping[str, ChatClient] | None = None,
    ) -> None:
        """Build the verifier; nothing starts until `async with`.

        Args:
            config: Everything it needs; the defaults are the paper's settings on the embedded model.
            client: A model client to use instead of the configured endpoint (e.g. `ScriptedChatClient`).
            team_factory: The debate team to use instead of the configured one.
            prompts_dir: A prompt set or directory instead of `config.prompt_set`.
            attached_embedded: The configured base_url is an embedded server another process started
                (--workers), so reports and the call cache name the embedded model, not its loopback port.
            role_clients: A model client per role, instead of the endpoint `config.roles` gives it (with `client`
                and no client for a role that `config.roles` names, that role's turns go to `client`).
            cascade_clients: A model client per cascade team (`config.debate.cascade`, by name) for every role of
                that team, instead of the endpoints its configuration gives.

        Raises:
            UnknownNameError: the configuration names a stage implementation nothing registered.
            UsageError: a prompt file or chain spec that cannot be used, or a model for a role the chain has not.
            CalibrationError: a calibration fitted on another chain or prompt set (another model: at start).
        """
        self.config = config or VerifierConfig()
        check_config(self.config)
        prompts = prompts_dir or self.config.prompt_set
        self.chain: MarkovChain = load_chain(self.config.debate.chain)
        self.chain.check_roles([*self.config.named_roles(), *((f"roles.{r}", r) for r in role_clients or {})])
        team_factory = team_factory or TEAMS.get(self.config.team)(prompts_dir=prompts)
        # Prompt files are checked now, so a bad prompt set fails before any model starts.
        hashes = team_factory.prompt_hashes(self.chain)
        # refused here, before any model starts; then read again whenever the file changes, so a long-running desk
        # or guard takes a new fit without a restart
        debate = self.config.debate
        live = LiveCalibration(debate, self.chain, hashes) if debate.calibration is not None else None
        self._prompt_hashes = hashes
        self.runtime = Runtime(
            self.config,
            client=client,
            role_clients=role_clients,
            cascade_clients=cascade_clients,
            chain_roles=self.chain.spec.all_roles(),
            prompts_dir=prompts,
            attached_embedded=attached_embedded,
            prompt_hashes=hashes,
        )
        escalation: Escalation | Chooser | None = None
        if live is not None and stop_kind(debate.stop) == "voi":
            escalation = Chooser(self.runtime, self.chain, team_factory, live, hashes)
        elif live is not None and debate.cascade:
            escalation = Escalation(self.runtime, self.chain, team_factory, live, hashes)
        self.pipeline = Pipeline(self.runtime, self.chain, team_factory, live, escalation)

    @property
    def calibration(self) -> Calibration | None:
        """The run's calibration as its file is now (checked); None without one."""
        live = self.pipeline.calibration
        return live.current() if live is not None else None

    @property
    def client(self) -> ChatClient:
        """The model client (after start)."""
        return self.runtime.client

    @property
    def embedded(self) -> bool:
        """Whether the model is the embedded one."""
        return self.runtime.embedded

    def meta(self) -> RunMeta:
        """The reproducibility record attached to every report."""
        return self.runtime.meta()

    def worker_configs(self, workers: int) -> list[VerifierConfig]:
        """See `Runtime.worker_configs`."""
        return self.runtime.worker_configs(workers)

    def job(self, workers: int, handler: Callable[[Verifier], Callable[[T], Awaitable[R]]]) -> VerifierJob[T, R] | None:
        """The --workers job (debate.workers) running `handler`'s per-item work on up to `workers` processes over
        this started Verifier's endpoint; None when one process is all there is (one worker, or one model slot)."""
        configs = self.worker_configs(workers)
        return VerifierJob(configs, self.embedded, handler) if len(configs) > 1 else None

    async def __aenter__(self) -> Self:
        try:
            await self.runtime.start()
            if self.pipeline.calibration is not None:
                self.pipeline.calibration.bind_team(self.runtime.identities())
            if self.pipeline.escalation is not None:
                self.pipeline.escalation.bind()
        except BaseException:
            # __aexit__ does not run when __aenter__ fails: release what was started (cancellation included).
            await self.runtime.close()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.runtime.close()

    async def verify(self, item: TaskInput | str, *, task: str = "qa", **earlier: Any) -> Report:
        """Verify one response: its claims, their evidence, the prefilters, a debate per undecided claim, the rollup.

        What the item's `question` and `reference` mean depends on the task:

        - qa: `question` + `response` form one claim; `reference` is the knowledge.
        - summarization: `reference` is the source document; claims get its top-k sentences.
        - dialogue: `question` is the dialogue history (also evidence), `reference` the knowledge.
        - kbqa / general: claims get the top-k sentences of `reference` when given, else search results when a
          search backend is configured, else no evidence (knowledge-free, said in the report's note).
        - rag: `reference` is the sources ({id: text} or [{id, text, parent_id}]).

        Args:
            item: The response and what it is checked against: `TaskInput(response, question=..., reference=...,
                claims=..., id=...)`, or the response alone as text.
            task: A registered task (`debate tasks`).
            earlier: The keywords of earlier releases (`question=`, `reference=`, `item_id=`, ...), with the
                response as text: still accepted for one release, with a DeprecationWarning.

        Returns:
            The report: the response's verdict and score, and every claim's verdict with its debate.

        Raises:
            InputError: a malformed item (unknown task, empty response, a task's missing reference). Failures of
                the model or of a stage are not raised: they end the claim or the response `unverifiable` with a
                typed failure.
        """
        return await self.pipeline.verify(task_input(item, earlier), task=task)

    async def verify_claim(
        self,
        claim: Claim,
        evidence: Sequence[Evidence],
        *,
        usage: Usage | None = None,
        prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:
        """Debate one claim over the chain. A failed debate ends `unverifiable` with its typed failure."""
        return await self.pipeline.verify_claim(claim, evidence, usage=usage, prefilters=prefilters)


async def averify(
    item: TaskInput | str, *, task: str = "qa", config: VerifierConfig | None = None, **earlier: Any
) -> Report:
    """Verify one response with a short-lived Verifier.

    Args:
        item: A `TaskInput`, or the response alone as text; `task` and `earlier` are `Verifier.verify`'s.
        config: The verifier's configuration. Without it the endpoint comes from the environment
            (OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL), as for the command line; with none set, the embedded
            model is started (and said so in the log).

    Returns:
        The response's report.

    Raises:
        InputError: a malformed item.
        UsageError: a configuration naming something not registered, or an extra that is not installed.
    """
    item = checked_input(task_input(item, earlier), task)  # refused before any model starts
    config = config or VerifierConfig(model=ModelConfig.from_env())
    async with Verifier(config=config) as verifier:
        return await verifier.verify(item, task=task)


def verify(item: TaskInput | str, *, task: str = "qa", config: VerifierConfig | None = None, **earlier: Any) -> Report:
    """Synchronous `averify`. Inside a running event loop (Jupyter, IPython), where `asyncio.run` cannot be called,
    it runs in a worker thread with its own loop and blocks until done; in your own async code, `await averify(...)`
    instead.

    Args:
        item: A `TaskInput`, or the response alone as text; the other arguments are `averify`'s.

    Returns:
        The response's report.

    Raises:
        InputError: a malformed item.
        UsageError: a configuration naming something not registered, or an extra that is not installed.
    """
    return run_blocking(averify(item, task=task, config=config, **earlier))


_EARLIER = {"question", "reference", "reference_source", "claims", "item_id"}
"""The keywords verify took before TaskInput was its one input."""


def task_input(item: TaskInput | str, earlier: dict[str, Any]) -> TaskInput:
    """The item verify was given: a TaskInput as it is; text with the keywords of earlier releases (deprecated)."""
    if not earlier:
        return TaskInput(response=item) if isinstance(item, str) else item
    unknown = sorted(set(earlier) - _EARLIER)
    if unknown:
        raise TypeError(f"verify() got an unexpected keyword argument {unknown[0]!r}")
    if not isinstance(item, str):
        raise InputError(f"give the item's fields in the TaskInput, not as keywords ({', '.join(sorted(earlier))})")
    warnings.warn(
        "verify(response, question=..., reference=...) is deprecated: pass TaskInput(response, question=..., "
        "reference=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    fields = {("id" if k == "item_id" else k): v for k, v in earlier.items()}
    return TaskInput(response=item, **fields)


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
