"""What a Verifier owns while it runs: the model client (and the embedded server behind it), the call cache, the
shared retrieval resources, the started prefilters and the run's reproducibility record. It is the `StageContext`
every stage receives; it holds no pipeline logic."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import urlparse

from debate import telemetry
from debate.config import ModelConfig, RoleConfig, RoleModelConfig, VerifierConfig
from debate.errors import InputError, UsageError
from debate.evidence import RetrievalCache
from debate.llm import (
    EMBEDDED_MAX_STRING_CHARS,
    EMBEDDED_MODEL_NAME,
    EMBEDDED_STILL_WAITING_S,
    EMBEDDED_TIMEOUT_S,
    CachingChatClient,
    ChatClient,
    ChatRequest,
    ChatResponse,
    EmbeddedServer,
    ModelUnavailableError,
    OpenAIChatClient,
    RoleRoutedClient,
    TracedChatClient,
)
from debate.plugins import PREFILTERS, RETRIEVERS, SEARCH_BACKENDS, TASKS, Prefilter, Retriever, SearchBackend, Task
from debate.provenance import depended_files, git_commit, package_version
from debate.types import RunMeta

__all__ = ["Runtime"]

log = logging.getLogger("debate.pipeline")


def _unique_label(name: str, config: ModelConfig, default: ModelConfig, taken: set[str]) -> str:
    """A model's name, made unique in its team when another of its models has that name: by the endpoint's host
    (two providers of one model at two prices are two models), or on one endpoint by the sampling settings that
    differ (a Skeptic at temperature 0.7 is another agent than one at 0)."""
    if name not in taken:
        return name
    host = urlparse(config.base_url).netloc if config.base_url else "scripted"
    if config.base_url != default.base_url:
        label = f"{name}@{host}"
    else:
        fields = ("temperature", "max_tokens", "seed", "structured_output", "max_string_chars")
        differ = [f"{f}={getattr(config, f)}" for f in fields if getattr(config, f) != getattr(default, f)]
        label = f"{name}[{','.join(differ)}]" if differ else f"{name}@{host}"
    unique, extra = label, 2
    while unique in taken:
        unique, extra = f"{label}#{extra}", extra + 1
    return unique


def _secret(config: ModelConfig) -> str:
    return config.api_key.get_secret_value() if config.api_key else ""


class _Borrowed:
    """A client the caller gave and still owns, under a wrapper that may close what it holds."""

    def __init__(self, inner: ChatClient) -> None:
        self._inner = inner

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return await self._inner.complete(request)

    async def accept(self, response: ChatResponse) -> None:
        await self._inner.accept(response)

    async def aclose(self) -> None:
        """The caller closes it."""


_NOT_STARTED = "Verifier is not started; use `async with Verifier(...) as v:`"


class Runtime:
    """The resources of one Verifier, started and closed with it (see `start` and `close`)."""

    def __init__(
        self,
        config: VerifierConfig,
        *,
        client: ChatClient | None = None,
        role_clients: Mapping[str, ChatClient] | None = None,
        prompts_dir: str | None = None,
        attached_embedded: bool = False,
        prompt_hashes: dict[str, str] | None = None,
    ) -> None:
        self._config = config
        self._attached_embedded = attached_embedded
        self._client = client
        self._given_client = client
        self._role_clients = dict(role_clients or {})
        self._owns_client = client is None
        self.role_models: dict[str, ModelConfig] = {}
        """Each role whose turns run on a model of its own, with that model's configuration as resolved at start."""
        self._router: RoleRoutedClient | None = None
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

    def role_labels(self) -> dict[str, str]:
        """Each role with a model of its own and that model's name (as turns and usage name it)."""
        router = self._router
        return {} if router is None else {role: router.label_for(role) for role in self.role_models}

    def model_configs(self) -> dict[str, ModelConfig]:
        """Every model of the team by its name, `[model]`'s first (prices, usage and limits are per model)."""
        models = {self.client.model_name: self.model_config}
        labels = self.role_labels()
        for role, config in self.role_models.items():
            models.setdefault(labels[role], config)
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
        base = self.client if self._owns_client else _Borrowed(self.client)
        self._client = self._wrapped(base, self.model_config, owns=True, tracing=tracing)
        self._owns_client = True
        await self._open_roles(tracing)
        self._prefilters = [PREFILTERS.get(name)(self) for name in self._config.prefilter.prefilters]

    async def _open_client(self) -> None:
        model_config = self._config.model
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
                    # A 135M model under a grammar can write one string until the token limit cuts the reply.
                    "max_string_chars": model_config.max_string_chars or EMBEDDED_MAX_STRING_CHARS,
                    # A local generation always ends (max_tokens bounds it) and a dead server closes its socket at
                    # once: a busy CPU makes it slow, not down, so it is not cut off and asked again from the start.
                    "timeout_s": max(model_config.timeout_s, EMBEDDED_TIMEOUT_S),
                }
            )
        still_waiting = EMBEDDED_STILL_WAITING_S if self._server is not None else None
        client = OpenAIChatClient(config=model_config, still_waiting_s=still_waiting)
        self._client = client
        await client.resolve_model()
        self.model_config = model_config.model_copy(update={"model": client.model_name})

    def _wrapped(self, client: ChatClient, config: ModelConfig, *, owns: bool, tracing: bool) -> ChatClient:
        """`client` behind the call cache (when configured) and tracing (when on)."""
        if self._config.call_cache is not None:
            settings = config.model_dump(
                mode="json", include={"temperature", "max_tokens", "seed", "structured_output", "max_string_chars"}
            )
            endpoint = config.base_url or "scripted"
            if self.embedded and config.base_url == self.model_config.base_url:
                endpoint = "embedded:" + EMBEDDED_MODEL_NAME  # its loopback port changes every start
            client = CachingChatClient(
                client, path=self._config.call_cache, endpoint=endpoint, settings=settings, owns_inner=owns
            )
            owns = True
        if tracing:
            client = TracedChatClient(client, temperature=config.temperature, owns_inner=owns)
        return client

    async def _open_roles(self, tracing: bool) -> None:
        """A client per model the roles name beyond `[model]` (roles that resolve to one model share it), then the
        router in front of them all. A role's model is opened as `[model]` is: a given client stands in for it."""
        default = (self.client.model_name, self.client)
        opened: dict[str, tuple[str, ChatClient, ModelConfig]] = {}
        routes: dict[str, tuple[str, ChatClient]] = {}
        for role in dict.fromkeys([*self._config.roles, *self._role_clients]):
            given = self._config.roles.get(role)
            # Over the model as resolved: a role that changes only the temperature keeps the embedded model's port.
            config = given.model.over(self.model_config) if given is not None else self.model_config
            if config == self.model_config and role not in self._role_clients:
                continue
            shared = self._given_client
            if isinstance(shared, RoleRoutedClient) and role not in self._role_clients:
                # Another Verifier's team (the desk's per-audit overrides): its role's model as it resolved it.
                label, client = shared.route(role)
                routes[role], self.role_models[role] = (label, _Borrowed(client)), config
                continue
            key = f"given:{role}" if role in self._role_clients else config.model_dump_json() + _secret(config)
            if key not in opened:
                client, resolved = await self._role_client(role, config)
                client = self._wrapped(client, resolved, owns=True, tracing=tracing)
                taken = {default[0], *(entry[0] for entry in opened.values())}
                label = _unique_label(client.model_name, resolved, self.model_config, taken)
                opened[key] = (label, client, resolved)
            label, client, self.role_models[role] = opened[key]
            routes[role] = (label, client)
        self._router = RoleRoutedClient(default, routes, owns=True)
        self._client = self._router

    async def _role_client(self, role: str, config: ModelConfig) -> tuple[ChatClient, ModelConfig]:
        given = self._role_clients.get(role) or self._given_client
        if given is not None:
            return _Borrowed(given), config.model_copy(update={"model": given.model_name})
        client = OpenAIChatClient(config=config)
        try:
            await client.resolve_model()
        except ModelUnavailableError as exc:
            if config.model is None:
                await client.aclose()
                raise UsageError(
                    f"roles.{role}.model: {exc.message}; name the role's model (roles.{role}.model.model) and the "
                    "run starts without it, its turns failing until it answers"
                ) from None
            # A role's model that is down fails only its turns (their claims unverifiable), as a model that goes
            # down mid-run does: the rest of the team still works.
            log.warning("roles.%s.model: %s: the %s's turns fail until it answers", role, exc.message, role)
        except BaseException:
            await client.aclose()
            raise
        return client, config.model_copy(update={"model": client.model_name})

    async def close(self) -> None:
        """Close the search backend and the client (when owned), then stop the embedded server, whatever fails."""
        try:
            if self._search_backend is not None:
                backend, self._search_backend = self._search_backend, None
                await backend.aclose()
            if self._owns_client and self._client is not None:
                client, self._client = self._client, None
                await client.aclose()
        finally:
            telemetry.flush()
            if self._server is not None:
                server, self._server = self._server, None
                server.stop()
