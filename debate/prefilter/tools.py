"""Tool-call checks: audit an agent's tool call against the registered JSON-schema definitions before it runs."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AllowListChecker",
    "FactChecker",
    "PermissionChecker",
    "ToolCallChecker",
    "ToolCallFinding",
    "ToolDefinition",
    "ToolRegistry",
    "correction_message",
]

FindingKind = Literal["tool_name", "parameter", "fact"]


class ToolCallFinding(BaseModel):
    """One problem with a tool call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FindingKind
    """tool_name, parameter or fact."""
    confidence: float = Field(ge=0, le=1)
    """How sure the check is that the call is wrong."""
    evidence: str
    """What was found."""
    correction: str
    """What the agent should do instead."""


class ToolDefinition(BaseModel):
    """A tool in OpenAI's function format."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1)
    """Function name."""
    description: str = ""
    """What it does."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments object."""


class ToolRegistry:
    """Registered tools by name."""

    def __init__(self, tools: Iterable[ToolDefinition]) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"tool {tool.name!r} is defined twice")
            self.tools[tool.name] = tool

    @classmethod
    def from_openai(cls, definitions: Sequence[Mapping[str, Any]]) -> ToolRegistry:
        """From `[{"type": "function", "function": {...}}]` or bare `[{"name": ..., "parameters": ...}]`."""
        tools = []
        for index, item in enumerate(definitions):
            body = item.get("function", item) if isinstance(item, Mapping) else None
            if not isinstance(body, Mapping) or "name" not in body:
                raise ValueError(f"tool definition {index}: expected an object with a function name")
            tools.append(ToolDefinition.model_validate(body))
        return cls(tools)

    @classmethod
    def from_file(cls, path: str | Path) -> ToolRegistry:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, Mapping) and "tools" in data:
            data = data["tools"]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of tool definitions (or {{'tools': [...]}})")
        return cls.from_openai(data)


class FactChecker(Protocol):
    """A domain check run after the schema checks (allow-lists, permissions, ...)."""

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]: ...


class AllowListChecker:
    """Values of one parameter must start with an allowed prefix (e.g. API endpoints a tool may call)."""

    def __init__(self, *, tool: str, parameter: str, allowed: Sequence[str]) -> None:
        self._tool, self._parameter, self._allowed = tool, parameter, tuple(allowed)

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]:
        if name != self._tool or self._parameter not in arguments:
            return []
        value = str(arguments[self._parameter])
        if any(value.startswith(prefix) for prefix in self._allowed):
            return []
        return [
            ToolCallFinding(
                kind="fact",
                confidence=0.9,
                evidence=f"{self._parameter}={value!r} is not on the allow-list for {name}",
                correction=f"use one of: {', '.join(self._allowed)}",
            )
        ]


class PermissionChecker:
    """A tool may run only if the caller holds the permission it requires."""

    def __init__(self, *, required: Mapping[str, str], granted: Iterable[str]) -> None:
        self._required = dict(required)
        self._granted = set(granted)

    def check(self, name: str, arguments: Mapping[str, Any]) -> list[ToolCallFinding]:
        needed = self._required.get(name)
        if needed is None or needed in self._granted:
            return []
        return [
            ToolCallFinding(
                kind="fact",
                confidence=0.95,
                evidence=f"{name} requires permission {needed!r}, which is not granted",
                correction=f"do not call {name}; ask for {needed!r} or use a permitted tool",
            )
        ]


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, expected: str | list[str]) -> bool:
    names = [expected] if isinstance(expected, str) else expected
    for name in names:
        kinds = _JSON_TYPES.get(name)
        if kinds is None:
            return True  # an unknown type name is the schema's problem, not the call's
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, kinds):
            return True
    return False


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return next((n for n, kinds in _JSON_TYPES.items() if isinstance(value, kinds)), type(value).__name__)


def _parameter(confidence: float, evidence: str, correction: str) -> ToolCallFinding:
    return ToolCallFinding(kind="parameter", confidence=confidence, evidence=evidence, correction=correction)


def _with_article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


class ToolCallChecker:
    """Schema checks (name, parameters) and then pluggable fact checks."""

    def __init__(self, registry: ToolRegistry, *, fact_checkers: Sequence[FactChecker] = ()) -> None:
        self._registry = registry
        self._fact_checkers = list(fact_checkers)

    def check(self, name: str, arguments: Mapping[str, Any] | str) -> list[ToolCallFinding]:
        tool = self._registry.tools.get(name)
        if tool is None:
            return [self._unknown_tool(name)]
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return [
                    _parameter(
                        0.95,
                        f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})",
                        "send the arguments as one JSON object",
                    )
                ]
        if not isinstance(arguments, Mapping):
            return [
                _parameter(
                    0.95,
                    f"the arguments are JSON {_with_article(_type_name(arguments))}, not an object",
                    "send the arguments as one JSON object",
                )
            ]
        findings = self._check_object(arguments, tool.parameters, path="")
        for checker in self._fact_checkers:
            findings.extend(checker.check(name, arguments))
        return findings

    def _unknown_tool(self, name: str) -> ToolCallFinding:
        names = sorted(self._registry.tools)
        scored = sorted(((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in names), reverse=True)
        if scored and scored[0][0] > 0.6:
            best = scored[0][1]
            return ToolCallFinding(
                kind="tool_name",
                confidence=0.9,
                evidence=f"no tool named {name!r}; {best!r} is the closest (similarity {scored[0][0]:.2f})",
                correction=f"call {best!r}",
            )
        return ToolCallFinding(
            kind="tool_name",
            confidence=0.95,
            evidence=f"no tool named {name!r}",
            correction=f"call one of the available tools: {', '.join(names) or '(none registered)'}",
        )

    def _check_object(self, value: Mapping[str, Any], schema: Mapping[str, Any], *, path: str) -> list[ToolCallFinding]:
        findings: list[ToolCallFinding] = []
        properties: Mapping[str, Any] = schema.get("properties", {}) or {}
        allowed = sorted(properties)
        if schema.get("additionalProperties", False) is not True:
            for key in value:
                if key not in properties:
                    findings.append(
                        _parameter(
                            0.8,
                            f"unknown parameter {path + key!r}",
                            f"use only the allowed parameters: {', '.join(allowed) or '(none)'}",
                        )
                    )
        for key in schema.get("required", []) or []:
            if key not in value:
                findings.append(
                    _parameter(0.95, f"missing required parameter {path + key!r}", f"provide {path + key!r}")
                )
        for key, sub in properties.items():
            if key in value and isinstance(sub, Mapping):
                findings.extend(self._check_value(value[key], sub, path=path + key))
        return findings

    def _check_value(self, value: Any, schema: Mapping[str, Any], *, path: str) -> list[ToolCallFinding]:
        expected = schema.get("type")
        if expected is not None and not _type_ok(value, expected):
            return [
                _parameter(
                    0.9,
                    f"{path!r} is {_with_article(_type_name(value))}, the schema wants {expected}",
                    f"send {path!r} as {expected}",
                )
            ]
        findings: list[ToolCallFinding] = []
        if "enum" in schema and value not in schema["enum"]:
            findings.append(
                _parameter(
                    0.95,
                    f"{path!r}={json.dumps(value)} is not one of {json.dumps(schema['enum'])}",
                    f"use one of {json.dumps(schema['enum'])} for {path!r}",
                )
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                findings.append(
                    _parameter(
                        0.9,
                        f"{path!r}={value} is below the minimum {schema['minimum']}",
                        f"use a value >= {schema['minimum']} for {path!r}",
                    )
                )
            if "maximum" in schema and value > schema["maximum"]:
                findings.append(
                    _parameter(
                        0.9,
                        f"{path!r}={value} is above the maximum {schema['maximum']}",
                        f"use a value <= {schema['maximum']} for {path!r}",
                    )
                )
        if isinstance(value, Mapping) and ("properties" in schema or "required" in schema):
            findings.extend(self._check_object(value, schema, path=path + "."))
        if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                findings.extend(self._check_value(item, schema["items"], path=f"{path}[{index}]"))
        return findings


def correction_message(findings: Sequence[ToolCallFinding]) -> str:
    """Feedback for the agent, so it can correct its call."""
    if not findings:
        return "The tool call passed all checks."
    lines = ["Your tool call was not executed because it has problems:"]
    for i, finding in enumerate(findings, start=1):
        lines.append(f"{i}. {finding.evidence}. Fix: {finding.correction}.")
    lines.append("Send a corrected tool call.")
    return "\n".join(lines)
