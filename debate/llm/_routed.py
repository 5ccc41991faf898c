"""A team with a model per role: one ChatClient in front of several, routing each debate turn's request to its
role's model by the purpose it declares (`debate:<role>`); every other request goes to the run's `[model]`.

Each response comes back named by its model's label (the name the run resolved, made unique when two endpoints
serve the same name), so a turn's transcript, the usage per model and the cost per model all read one name."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from debate.types import ChatClient, ChatRequest, ChatResponse

__all__ = ["DEBATE_PURPOSE", "RoleRoutedClient", "role_of"]

DEBATE_PURPOSE = "debate:"
"""The purpose prefix of a debate turn's request; the role's name follows it."""

_KEPT = 4096
"""Relabelled responses remembered until accepted (an unusable reply is never accepted: the oldest are forgotten)."""


def role_of(purpose: str) -> str | None:
    """The role a request's purpose names (`debate:leader` -> leader), else None."""
    return purpose[len(DEBATE_PURPOSE) :] if purpose.startswith(DEBATE_PURPOSE) else None


class RoleRoutedClient:
    """Routes by role; the clients behind it stay owned by whoever opened them (the run closes each once)."""

    def __init__(self, default: tuple[str, ChatClient], roles: Mapping[str, tuple[str, ChatClient]]) -> None:
        """`default`: the label and client of `[model]`; `roles`: each role's label and client (roles on `[model]`
        need not be listed)."""
        self._default = default
        self._roles = dict(roles)
        self._relabelled: OrderedDict[int, tuple[ChatResponse, ChatResponse, ChatClient]] = OrderedDict()
        self._by_label: dict[str, ChatClient] = {default[0]: default[1]}
        for label, client in self._roles.values():
            self._by_label.setdefault(label, client)

    @property
    def model_name(self) -> str:
        return self._default[0]

    def label_for(self, role: str) -> str:
        """The model role `role`'s turns run on."""
        return self._roles.get(role, self._default)[0]

    def route(self, role: str) -> tuple[str, ChatClient]:
        """The label and client of role `role`'s turns (`[model]`'s for a role with none of its own)."""
        return self._roles.get(role, self._default)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        role = role_of(request.purpose)
        label, client = self._roles.get(role, self._default) if role is not None else self._default
        response = await client.complete(request)
        if response.model == label:
            return response
        relabelled = response.model_copy(update={"model": label})
        self._relabelled[id(relabelled)] = (relabelled, response, client)
        while len(self._relabelled) > _KEPT:
            self._relabelled.popitem(last=False)
        return relabelled

    async def accept(self, response: ChatResponse) -> None:
        entry = self._relabelled.pop(id(response), None)
        if entry is not None and entry[0] is response:
            await entry[2].accept(entry[1])
            return
        client = self._by_label.get(response.model)
        if client is not None:
            await client.accept(response)

    async def aclose(self) -> None:
        """Nothing of its own: a client it routes to may serve several teams, so the run closes each once."""
