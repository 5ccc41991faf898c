"""What a Verifier owns while it runs: the model client (and the embedded server behind it), the call cache, the
shared retrieval resources, the started prefilters and the run's reproducibility record. It is the `StageContext`
every stage receives; it holds no pipeline logic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from debate import telemetry
from debate.config import ModelConfig, RoleConfig, RoleModelConfig, VerifierConfig
from debate.errors import InputError, UsageError
from debate.evidence import RetrievalCache
from debate.llm import (
    EMBEDDED_MODEL_NAME,
    EMBEDDED_STILL_WAITING_S,
    CachingChatClient,
    ChatClient,
    EmbeddedServer,
    OpenAIChatClient,
    TracedChatClient,
    embedded_model_config,
)
from debate.pipeline._teams import Borrowed, OpenedTeam, TeamClients
from debate.plugins import PREFILTERS, RETRIEVERS, SEARCH_BACKENDS, TASKS, Prefilter, Retriever, SearchBackend, Task
from debate.provenance import depended_files, git_commit, package_version
from debate.types import SAMPLING_FIELDS, ModelIdentity, RunMeta

__all__ = ["Runtime"]


_NOT_STARTED = "Verifier is not started; use `async with Verifier(...) as v:`"


class Runtime:
    """The resources of one Verifier, started and closed with it (see `start` and `close`)."""

    def __init__(
        self,
        config: VerifierConfig,
        *,
        client: ChatClient | None = None,
        role_clients: Mapping[str, ChatClient] | None = None,
        cascade_clients: Mapping[str, ChatClient] | None = None,
        chain_roles: Sequence[str] = (),
        prompts_dir: str | None = None,
        attached_embedded: bool = False,
        prompt_hashes: dict[str, str] | None = None,
    ) -> None:
        self._config = config
        self._attached_embedded = attached_embedded
        self._client = client
        self._given_client = client
        self._role_clients = dict(role_clients or {})
        self._cascade_clients = dict(cascade_clients or {})
        self._chain_roles = list(chain_roles)
        self._owns_client = client is None
        self._default_client: ChatClient | None = None
        self._teams: TeamClients | None = None
        self.cascade: list[OpenedTeam] = []
        """Each cascade team (`debate.cascade`, in order) as opened: its router and its roles' models."""
        self._team: OpenedTeam | None = None
        self._server: EmbeddedServer | None = None
        self.model_config: ModelConfig = config.model
        """The model configuration as resolved at start (endpoint, model name, structured output)."""
        self._prompts_dir = prompts_dir
        self._prompt_hashes = dict(prompt_hashes or {})
        self._cache = RetrievalCache(directory=config.retrieval.cache_dir)
        self._retriever: Retriever | None = None
        self._search_backend: SearchBackend | None = None
        self._tasks: dict[str, Task] = {}
        self._prefilters: list[Prefilter] | None = None
        self._meta: RunMeta | None = None

    # --- StageContext -------------------------------------------------------------------------------------------

    @property
    def config(self) -> VerifierConfig:
        return self._config

    @property
    def client(self) -> ChatClient:
        if self._client is None:
            raise UsageError(_NOT_STARTED)
        return self._client

    @property
    def prompts_dir(self) -> str | None:
        return self._prompts_dir

    @property
    def cache(self) -> RetrievalCache:
        return self._cache

    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = RETRIEVERS.get(self._config.retrieval.retriever)()
        return self._retriever

    def search_backend(self) -> SearchBackend | None:
        if self._config.search is None:
            return None
        if self._search_backend is None:
            self._search_backend = SEARCH_BACKENDS.get(self._config.search.backend)(self._config.search)
        return self._search_backend

    # --- what the pipeline uses ---------------------------------------------------------------------------------

    @property
    def role_models(self) -> dict[str, ModelConfig]:
        """Each role whose turns run on a model of its own, with that model's configuration as resolved at start."""
        return {} if self._team is None else self._team.role_models

    def role_labels(self) -> dict[str, str]:
        """Each role with a model of its own and that model's name (as turns and usage name it)."""
        return {} if self._team is None else self._team.labels()

    def identities(self, team: OpenedTeam | None = None) -> dict[str, ModelIdentity]:
        """Each role of the chain and the identity of the model its turns run on (`team`: a cascade team's; None:
        the run's own): the model name as resolved and the settings that change its answers, never a label."""
        opened = team if team is not None else self._team
        own = {} if opened is None else opened.role_models
        labels = {} if opened is None else opened.labels()
        default = self.model_config.identity(name=self.model_config.model or self.client.model_name)
        return {
            role: own[role].identity(name=own[role].model or labels[role]) if role in own else default
            for role in self._chain_roles
        }

    def model_configs(self) -> dict[str, ModelConfig]:
        """Every model of the run by its name, `[model]`'s first, then the roles', then each cascade team's (prices,
        usage and limits are per model)."""
        models = {self.client.model_name: self.model_config}
        labels = self.role_labels()
        for role, config in self.role_models.items():
            models.setdefault(labels[role], config)
        for team in self.cascade:
            for role, name in team.labels().items():
                models.setdefault(name, team.role_models[role])
        return models

    @property
    def embedded(self) -> bool:
        return self._server is not None or self._attached_embedded

    @property
    def prefilters(self) -> list[Prefilter]:
        if self._prefilters is None:
            raise UsageError(_NOT_STARTED)
        return self._prefilters

    def task(self, name: str) -> Task:
        """The registered task, made once per runtime; an unknown name is the caller's InputError."""
        if name not in self._tasks:
            try:
                factory = TASKS.get(name)
            except LookupError as exc:
                raise InputError(str(exc)) from exc
            self._tasks[name] = factory()
        return self._tasks[name]

    def meta(self) -> RunMeta:
        """The reproducibility record attached to every report."""
        if self._meta is None:
            # All but its time is fixed once started; dumping the configuration for each report cost a guarded
            # request ~0.1 ms (benchmarks/bench_guard.py). Reports share its (frozen) record.
            resolved = self._config.model_copy(update={"model": self.model_config})
            prompts = dict(self._prompt_hashes)
            for prefilter in self.prefilters:
                prompts |= prefilter.prompt_hashes()
            self._meta = RunMeta(
                model=self.client.model_name,
                roles=self.role_labels(),
                team=self.identities(),
                base_url=self.model_config.base_url,
                embedded=self.embedded,
                config=(config := resolved.model_dump(mode="json")),
                files=depended_files(config),
                prompt_set=self._prompts_dir or "paper",
                prompts=prompts,
                seed=self.model_config.seed,
                package_version=package_version(),
                git_commit=git_commit(),
                created_at=datetime.now(UTC),
            )
        return self._meta.model_copy(update={"created_at": datetime.now(UTC)})

    def worker_configs(self, workers: int) -> list[VerifierConfig]:
        """This started runtime's configuration for each of up to `workers` processes: the resolved endpoint and
        model (so no worker starts its own embedded model), with the model concurrency split between them so that
        together they send what one process would (one worker per slot at most)."""
        if self._client is None:
            raise UsageError(_NOT_STARTED)
        total = self.model_config.max_concurrency
        count = max(1, min(workers, total))
        shares = [total // count + (1 if k < total % count else 0) for k in range(count)]
        return [
            self._config.model_copy(
                update={
                    "model": self.model_config.model_copy(update={"max_concurrency": share}),
                    "roles": self._worker_roles(count, k),
                }
            )
            for k, share in enumerate(shares)
        ]

    def _worker_roles(self, count: int, worker: int) -> dict[str, RoleConfig]:
        """Each role's model as resolved (its endpoint and name, so no worker starts its own), its concurrency split
        as `[model]`'s is (each worker one slot at least)."""
        roles: dict[str, RoleConfig] = {}
        for role, model in self.role_models.items():
            total = model.max_concurrency
            share = max(1, total // count + (1 if worker < total % count else 0))
            given = model.model_dump(exclude={"api_key"}) | {"api_key": model.api_key, "max_concurrency": share}
            roles[role] = RoleConfig(model=RoleModelConfig.model_validate(given))
        return roles

    # --- life cycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the embedded model when no endpoint is configured, open the client, wrap it in the call cache
        when one is configured, and make the prefilters. On failure, `close` releases what was started."""
        self._meta = None  # a restarted runtime may have another endpoint (the embedded model's port changes)
        # Tracing first: a missing extra or a bad endpoint is refused before any model starts.
        tracing = telemetry.configure(self._config.telemetry.endpoint, project=self._config.telemetry.project)
        if self._client is None:
            await self._open_client()
        base = self.client if self._owns_client else Borrowed(self.client)
        self._client = self._default_client = self._wrapped(base, self.model_config, tracing)
        await self._open_roles(tracing)
        self._prefilters = [PREFILTERS.get(name)(self) for name in self._config.prefilter.prefilters]

    async def _open_client(self) -> None:
        model_config = self._config.model
        if model_config.base_url is None:
            self._server = EmbeddedServer()
            await self._server.astart()
            model_config = embedded_model_config(model_config, self._server.base_url)
        still_waiting = EMBEDDED_STILL_WAITING_S if self._server is not None else None
        client = OpenAIChatClient(config=model_config, still_waiting_s=still_waiting)
        self._client = client
        await client.resolve_model()
        self.model_config = model_config.model_copy(update={"model": client.model_name})

    def _wrapped(self, client: ChatClient, config: ModelConfig, tracing: bool) -> ChatClient:
        """`client` behind the call cache (when configured) and tracing (when on); closing it closes `client`."""
        if self._config.call_cache is not None:
            settings = config.model_dump(mode="json", include=set(SAMPLING_FIELDS))
            endpoint = config.base_url or "scripted"
            if self.embedded and config.base_url == self.model_config.base_url:
                endpoint = "embedded:" + EMBEDDED_MODEL_NAME  # its loopback port changes every start
            client = CachingChatClient(
                client, path=self._config.call_cache, endpoint=endpoint, settings=settings, owns_inner=True
            )
        if tracing:
            client = TracedChatClient(client, temperature=config.temperature, owns_inner=True)
        return client

    async def _open_roles(self, tracing: bool) -> None:
        """A client per model the roles name beyond `[model]` (roles that resolve to one model share it), then the
        router in front of them all; then each cascade team's. A role's model is opened as `[model]` is: a given
        client stands in for it."""
        default = self.client
        self._teams = TeamClients(
            self.model_config, default, given=self._given_client, wrap=lambda c, m: self._wrapped(c, m, tracing)
        )
        # Over the model as resolved: a role that changes only the temperature keeps the embedded model's port.
        wanted = {role: given.model.over(self.model_config) for role, given in self._config.roles.items()}
        wanted |= {role: self.model_config for role in self._role_clients if role not in wanted}
        self._team = await self._teams.team(wanted, self._role_clients)
        self.cascade = []
        for step in self._config.debate.cascade:
            step_wanted = {role: step.model_for(role, self.model_config) for role in self._chain_roles}
            given = self._cascade_clients.get(step.name)
            self.cascade.append(
                await self._teams.team(step_wanted, dict.fromkeys(self._chain_roles, given) if given else None)
            )
        self._client = self._team.router

    async def close(self) -> None:
        """Close the search backend and the client (when owned), then stop the embedded server, whatever fails."""
        try:
            if self._search_backend is not None:
                backend, self._search_backend = self._search_backend, None
                await backend.aclose()
            if self._teams is not None:
                teams, self._teams = self._teams, None
                await teams.aclose()
            # Started: the wrapped `[model]` client; failed while resolving it: the client itself, when ours.
            client = self._default_client or (self._client if self._owns_client else None)
            self._default_client = self._client = None
            if client is not None:
                await client.aclose()
        finally:
            telemetry.flush()
            if self._server is not None:
                server, self._server = self._server, None
                server.stop()
