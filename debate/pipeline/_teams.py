"""The clients of a run's teams: the run's own (`[model]` and `[roles.<role>.model]`) and each cascade team's.

A model is opened once per run however many roles and teams name it (each endpoint one client, one concurrency
limit, one rate-limit schedule), named uniquely in the run (debate.llm's RoleRoutedClient), and put behind the
call cache and tracing as `[model]` is. A team is a router: each role's turns to its model."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from debate.config import ModelConfig
from debate.endpoints import unique_label
from debate.errors import UsageError
from debate.llm import ChatClient, ChatRequest, ChatResponse, ModelUnavailableError, OpenAIChatClient, RoleRoutedClient

__all__ = ["Borrowed", "OpenedTeam", "TeamClients"]

log = logging.getLogger("debate.pipeline")

Wrap = Callable[[ChatClient, ModelConfig], ChatClient]
"""Puts a client behind the run's call cache and tracing."""


def _key(config: ModelConfig) -> str:
    return config.model_dump_json() + (config.api_key.get_secret_value() if config.api_key else "")


class Borrowed:
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


@dataclass
class OpenedTeam:
    """A team's router, and the model each of its roles on a model other than `[model]` runs on."""

    router: RoleRoutedClient
    role_models: dict[str, ModelConfig] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        """Each such role and its model's name."""
        return {role: self.router.label_for(role) for role in self.role_models}


class TeamClients:
    """Opens and owns every model client of a run but `[model]`'s (whose client the runtime owns)."""

    def __init__(self, default: ModelConfig, client: ChatClient, *, given: ChatClient | None, wrap: Wrap) -> None:
        self._default = default
        self._client = client
        self._given = given
        self._wrap = wrap
        self._opened: dict[str, tuple[str, ChatClient, ModelConfig]] = {}
        self._stack = AsyncExitStack()

    async def team(
        self, wanted: Mapping[str, ModelConfig], clients: Mapping[str, ChatClient] | None = None
    ) -> OpenedTeam:
        """A router for roles on `wanted` models (a role on `[model]` as resolved needs no entry), each role in
        `clients` on that client instead."""
        clients = clients or {}
        routes: dict[str, tuple[str, ChatClient]] = {}
        role_models: dict[str, ModelConfig] = {}
        for role, config in wanted.items():
            if config == self._default and role not in clients:
                continue
            router = clients.get(role, self._given)
            if isinstance(router, RoleRoutedClient):
                # Another Verifier's team (the desk's per-audit overrides: its run's team, or the cascade team given
                # for this team): its role's model as it resolved it, so each team keeps its own models.
                label, client = router.route(role)
                routes[role], role_models[role] = (label, Borrowed(client)), config
                continue
            key = f"given:{id(clients[role])}" if role in clients else _key(config)
            if key not in self._opened:
                opened, resolved = await self._open(role, config, clients.get(role))
                wrapped = self._wrap(opened, resolved)
                self._stack.push_async_callback(wrapped.aclose)
                taken = {self._client.model_name, *(entry[0] for entry in self._opened.values())}
                label = unique_label(wrapped.model_name, resolved, self._default, taken)
                self._opened[key] = (label, wrapped, resolved)
            label, client, role_models[role] = self._opened[key]
            routes[role] = (label, client)
        return OpenedTeam(RoleRoutedClient((self._client.model_name, self._client), routes), role_models)

    async def _open(self, role: str, config: ModelConfig, client: ChatClient | None) -> tuple[ChatClient, ModelConfig]:
        given = client or self._given
        if given is not None:
            return Borrowed(given), config.model_copy(update={"model": given.model_name})
        opened = OpenAIChatClient(config=config)
        try:
            await opened.resolve_model()
        except ModelUnavailableError as exc:
            if config.model is None:
                await opened.aclose()
                raise UsageError(
                    f"roles.{role}.model: {exc.message}; name the role's model (roles.{role}.model.model) and the "
                    "run starts without it, its turns failing until it answers"
                ) from None
            # A role's model that is down fails only its turns (their claims unverifiable), as a model that goes
            # down mid-run does: the rest of the team still works.
            log.warning("roles.%s.model: %s: the %s's turns fail until it answers", role, exc.message, role)
        except BaseException:
            await opened.aclose()
            raise
        return opened, config.model_copy(update={"model": opened.model_name})

    async def aclose(self) -> None:
        """Close every client opened, whichever fails."""
        stack, self._stack = self._stack, AsyncExitStack()
        await stack.aclose()
