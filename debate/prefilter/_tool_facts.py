"""The fact checks a tool call goes through after its schema check (the tool-call checks' FactChecker): known API
endpoints, permissions for destructive tools, and the destructive-SQL variant."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from debate.errors import InputError
from debate.prefilter._tool_messages import MessageLanguage, message
from debate.types import ToolCallFinding

__all__ = ["APIEndpointChecker", "DestructiveActionChecker", "EndpointMatch", "FactChecker", "PermissionChecker"]


class FactChecker(Protocol):
    """A domain check run after the schema checks (allow-lists, permissions, ...)."""

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]: ...


_API_PARAMETERS = ("endpoint", "url", "api_url", "api_endpoint", "base_url")
EndpointMatch = Literal["exact", "prefix"]


class APIEndpointChecker:
    """The tool-call checks' endpoint fact check (confidence 0.85): a call to the `api_call` tool must name, as its
    `endpoint`, one of the known endpoints exactly.

    match="prefix" is a named departure: any tool's URL-like argument (endpoint, url, api_url, api_endpoint,
    base_url) must start with an allowed prefix. It is looser (`https://api.example.com/v1/../v2` passes an
    `https://api.example.com/v1/` prefix) and kept for registries whose tools take full URLs."""

    confidence = 0.85

    def __init__(
        self,
        known: Sequence[str] | Mapping[str, str],
        *,
        match: EndpointMatch = "exact",
        language: MessageLanguage = "en",
    ) -> None:
        # The seed keeps a name -> endpoint dict and checks the values; a plain list is the same set of values.
        self._known = tuple(known.values()) if isinstance(known, Mapping) else tuple(known)
        empty = next((i for i, endpoint in enumerate(self._known, 1) if not str(endpoint).strip()), None)
        if empty is not None:
            # Every URL starts with "": an empty entry would allow any endpoint, and silently.
            raise InputError(f"allowed endpoint {empty} (--allow-endpoint) is empty: it would allow every URL")
        self._match = match
        self._language: MessageLanguage = language

    def _targets(self, name: str, arguments: Mapping[str, Any]) -> list[tuple[str, Any]]:
        if self._match == "exact":
            return [("endpoint", arguments["endpoint"])] if name == "api_call" and "endpoint" in arguments else []
        return [(p, arguments[p]) for p in _API_PARAMETERS if isinstance(arguments.get(p), str)]

    def _known_endpoint(self, value: Any) -> bool:
        if self._match == "exact":
            return value in self._known
        return any(_under(value, prefix) for prefix in self._known)

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]:
        return [
            ToolCallFinding(
                kind="fact",
                confidence=self.confidence,
                evidence=message("endpoint", self._language, endpoint=value),
                correction=message("endpoint_fix", self._language),
            )
            for parameter, value in self._targets(name, arguments)
            if not self._known_endpoint(value)
        ]


class PermissionChecker:
    """The tool-call checks' permission fact check (confidence 0.9): calling `delete_database` needs the
    `delete:database` permission.

    The seed builds the statement "删除数据库 <name>" and looks for `delete.*database` in it, which can never match
    its own (Chinese) statement, so as written it would never flag anything; we follow its evident intent: the tool
    call is the claim to that permission."""

    confidence = 0.9

    def __init__(
        self,
        granted: Iterable[str],
        *,
        tool: str = "delete_database",
        permission: str = "delete:database",
        language: MessageLanguage = "en",
    ) -> None:
        self._language: MessageLanguage = language
        self._granted = set(granted)
        self._tool = tool
        self._permission = permission

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]:
        if name != self._tool or self._permission in self._granted:
            return []
        return [
            ToolCallFinding(
                kind="fact",
                confidence=self.confidence,
                evidence=message("permission", self._language),
                correction=message("permission_fix", self._language),
            )
        ]


_DESTRUCTIVE_SQL = re.compile(r"\b(DROP|DELETE|TRUNCATE|ALTER)\b", re.IGNORECASE)
_DESTRUCTIVE_ACTIONS = frozenset({"drop", "delete", "truncate", "alter"})


class DestructiveActionChecker:
    """A named departure from the tool-call checks' permission check: destructive database actions in any tool (DROP,
    DELETE, TRUNCATE, ALTER, in a query or as the `action`/`operation` argument) need a permission the caller must hold
    (confidence 0.9)."""

    confidence = 0.9

    def __init__(self, granted: Iterable[str], *, permission: str = "db:write") -> None:
        self._granted = set(granted)
        self._permission = permission

    def _destructive(self, arguments: Mapping[str, Any]) -> str | None:
        for key in ("action", "operation"):
            value = arguments.get(key)
            if isinstance(value, str) and value.strip().lower() in _DESTRUCTIVE_ACTIONS:
                return value.strip().upper()
        for value in arguments.values():
            if isinstance(value, str) and (match := _DESTRUCTIVE_SQL.search(value)):
                return match.group(1).upper()
        return None

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]:
        action = self._destructive(arguments)
        if action is None or self._permission in self._granted:
            return []
        return [
            ToolCallFinding(
                kind="fact",
                confidence=self.confidence,
                evidence=f"{name} performs a destructive database action ({action}) without the "
                f"{self._permission!r} permission",
                correction=f"do not {action.lower()}; use a read-only action or ask for {self._permission!r}",
            )
        ]


def _under(url: str, prefix: str) -> bool:
    """`url` is `prefix` or lies under it: the prefix ends at a boundary of the URL (its end, `/`, `?` or `#`), so
    https://api.example.com allows https://api.example.com/v1 but not https://api.example.com.evil.net."""
    prefix = prefix.strip()
    if not url.startswith(prefix):
        return False
    rest = url[len(prefix) :]
    return not rest or prefix.endswith("/") or rest[0] in "/?#"
