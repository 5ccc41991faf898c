"""Tool-call checks: audit an agent's tool call against the registered JSON-schema definitions before it runs (the
correction loop is debate.prefilter._tool_correction)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from pydantic import BaseModel, ConfigDict, Field

from debate.errors import InputError
from debate.prefilter._tool_facts import (
    APIEndpointChecker,
    DestructiveActionChecker,
    EndpointMatch,
    FactChecker,
    PermissionChecker,
)
from debate.prefilter._tool_messages import MessageLanguage, message
from debate.types import CorrectionResult, ToolCall, ToolCallFinding

__all__ = [
    "APIEndpointChecker",
    "CorrectionResult",
    "DestructiveActionChecker",
    "EndpointMatch",
    "FactChecker",
    "MessageLanguage",
    "PermissionChecker",
    "ToolCall",
    "ToolCallChecker",
    "ToolCallFinding",
    "ToolDefinition",
    "ToolRegistry",
]


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
                raise InputError(f"tool {tool.name!r} is defined twice")
            try:
                Draft202012Validator.check_schema(tool.parameters)
            except SchemaError as exc:
                raise InputError(f"tool {tool.name!r}: parameters are not a valid JSON schema: {exc.message}") from exc
            self.tools[tool.name] = tool

    @classmethod
    def from_openai(cls, definitions: Sequence[Mapping[str, Any]]) -> ToolRegistry:
        """From `[{"type": "function", "function": {...}}]` or bare `[{"name": ..., "parameters": ...}]`."""
        tools = []
        for index, item in enumerate(definitions):
            body = item.get("function", item) if isinstance(item, Mapping) else None
            if not isinstance(body, Mapping) or "name" not in body:
                raise InputError(f"tool definition {index}: expected an object with a function name")
            tools.append(ToolDefinition.model_validate(body))
        return cls(tools)

    @classmethod
    def from_file(cls, path: str | Path) -> ToolRegistry:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as exc:  # not JSON, or not UTF-8
            raise InputError(f"{path}: not a JSON file of tool definitions ({exc})") from exc
        if isinstance(data, Mapping) and "tools" in data:
            data = data["tools"]
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON list of tool definitions (or {{'tools': [...]}})")
        return cls.from_openai(data)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    kinds = {"string": str, "integer": int, "number": float, "array": list, "object": dict, "null": type(None)}
    return next((n for n, kind in kinds.items() if isinstance(value, kind)), type(value).__name__)


def _with_article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def _closed(schema: Any, *, top: bool = True) -> Any:
    """The schema with `additionalProperties: false` wherever an object lists its properties and says nothing, and
    always at the top level: the tool-call checks flag every argument not among the tool's properties, whatever the
    schema says of extra ones (`additionalProperties: true` included)."""
    if isinstance(schema, list):
        return [_closed(s, top=False) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _closed(v, top=False) for k, v in schema.items()}
    if top or (isinstance(schema.get("properties"), Mapping) and "additionalProperties" not in schema):
        out["additionalProperties"] = False
    return out


def _path(error: ValidationError) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path]
    return "".join(parts).lstrip(".")


def _finding(error: ValidationError) -> list[ToolCallFinding]:
    """One jsonschema error as findings in our words (the library's message for the rarer keywords)."""
    path, value, rule = _path(error), error.instance, error.validator
    rule_value: Any = error.validator_value
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    where = f"{path!r}" if path else "the arguments"
    if rule == "required":
        present = error.instance if isinstance(error.instance, Mapping) else {}
        prefix = f"{path}." if path else ""
        return [
            parameter_finding(0.95, f"missing required parameter {prefix + k!r}", f"provide {prefix + k!r}")
            for k in rule_value
            if k not in present
        ]
    if rule == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        extra = [k for k in value if k not in allowed] if isinstance(value, Mapping) else []
        prefix = f"{path}." if path else ""
        return [
            parameter_finding(
                0.8,
                f"parameter {prefix + k!r} is not in the tool definition",
                f"allowed parameters: {', '.join(allowed) or '(none)'}",
            )
            for k in extra
        ]
    if rule == "type":
        wanted = error.validator_value
        return [
            parameter_finding(
                0.9,
                f"{where} is {_with_article(_type_name(value))}, the schema wants {wanted}",
                f"send {where} as {wanted}",
            )
        ]
    if rule == "enum":
        options = json.dumps(error.validator_value)
        return [
            parameter_finding(
                0.95, f"{where}={json.dumps(value)} is not one of {options}", f"use one of {options} for {where}"
            )
        ]
    if rule in ("minimum", "exclusiveMinimum"):
        return [
            parameter_finding(
                0.9,
                f"{where}={value} is below the minimum {error.validator_value}",
                f"use a value >= {error.validator_value} for {where}",
            )
        ]
    if rule in ("maximum", "exclusiveMaximum"):
        return [
            parameter_finding(
                0.9,
                f"{where}={value} is above the maximum {error.validator_value}",
                f"use a value <= {error.validator_value} for {where}",
            )
        ]
    return [parameter_finding(0.85, f"{where}: {error.message}", f"make {where} satisfy its schema ({rule})")]


def parameter_finding(confidence: float, evidence: str, correction: str) -> ToolCallFinding:
    return ToolCallFinding(kind="parameter", confidence=confidence, evidence=evidence, correction=correction)


def _seed_parameters(
    schema: Mapping[str, Any], arguments: Mapping[str, Any], language: MessageLanguage
) -> list[ToolCallFinding]:
    """The tool-call source's parameter layer, rule for rule and in its order: each argument in the call's order is
    undefined (0.8, and nothing more is checked of it), below `minimum` / above `maximum` when it is a number in
    Python's sense (a boolean is one: True is 1), then outside `enum` by Python's `in` (1 matches True); strings,
    None and the rest go unchecked for range, as there."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    findings: list[ToolCallFinding] = []
    for name, value in arguments.items():
        if name not in properties:
            findings.append(
                parameter_finding(
                    0.8,
                    message("undefined", language, name=name),
                    message("undefined_fix", language, allowed=list(properties)),
                )
            )
            continue
        rule = properties[name] if isinstance(properties[name], Mapping) else {}
        if ("minimum" in rule or "maximum" in rule) and isinstance(value, int | float):
            low, high = rule.get("minimum"), rule.get("maximum")
            if low is not None and value < low:
                findings.append(
                    parameter_finding(
                        0.9,
                        message("below", language, name=name, value=value, limit=low),
                        message("below_fix", language, limit=low),
                    )
                )
            if high is not None and value > high:
                findings.append(
                    parameter_finding(
                        0.9,
                        message("above", language, name=name, value=value, limit=high),
                        message("above_fix", language, limit=high),
                    )
                )
        if "enum" in rule and isinstance(rule["enum"], list) and value not in rule["enum"]:
            findings.append(
                parameter_finding(
                    0.95,
                    message("enum", language, name=name, value=value),
                    message("enum_fix", language, allowed=rule["enum"]),
                )
            )
    return findings


# What the source's parameter layer already says of a top-level argument; the schema check only adds the rest.
_SEED_RULES = frozenset({"minimum", "maximum", "enum"})


def _beyond_the_seed(error: ValidationError) -> bool:
    path = error.absolute_path
    if not path and error.validator == "additionalProperties":
        return False
    return not (len(path) == 1 and error.validator in _SEED_RULES)


class ToolCallChecker:
    """The tool-call source's checks: the tool's name (stop there when unknown), its parameter layer (undefined,
    minimum/maximum, enum, in the call's order), then, beyond the source, the rest of the JSON schema through the
    `jsonschema` library (Draft 2020-12: types, required, nested objects, patterns, ...), then the fact checks.
    `language`: the words of the source's findings and correction (en, or zh for its Chinese exactly)."""

    def __init__(
        self, registry: ToolRegistry, *, fact_checkers: Sequence[FactChecker] = (), language: MessageLanguage = "en"
    ) -> None:
        self._registry = registry
        self._fact_checkers = list(fact_checkers)
        self.language: MessageLanguage = language
        self._validators = {
            name: Draft202012Validator(_closed(tool.parameters)) for name, tool in registry.tools.items()
        }

    @property
    def registry(self) -> ToolRegistry:
        return self._registry

    def check(self, name: str, arguments: Mapping[str, Any] | str) -> list[ToolCallFinding]:
        tool = self._registry.tools.get(name)
        if tool is None:
            return [self._unknown_tool(name)]
        parsed = _arguments(arguments)
        if isinstance(parsed, ToolCallFinding):
            return [parsed]
        errors = sorted(
            (e for e in self._validators[name].iter_errors(parsed) if _beyond_the_seed(e)),
            key=lambda e: (e.validator != "required", list(map(str, e.absolute_path))),
        )
        findings = _seed_parameters(tool.parameters, parsed, self.language)
        findings.extend(finding for error in errors for finding in _finding(error))
        for checker in self._fact_checkers:
            findings.extend(checker.check(name, parsed))
        return findings

    def _unknown_tool(self, name: str) -> ToolCallFinding:
        names = list(self._registry.tools)
        # A stable sort by similarity, like the source's: ties keep registry order.
        scored = sorted(((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in names), key=lambda m: -m[0])
        language = self.language
        if scored and scored[0][0] > 0.6:
            evidence, correction = (
                message("tool_close", language, name=name),
                message("tool_close_fix", language, best=scored[0][1]),
            )
            return ToolCallFinding(kind="tool_name", confidence=0.9, evidence=evidence, correction=correction)
        # The source lists the first five, in registry order.
        evidence, correction = (
            message("tool_none", language, name=name),
            message("tool_none_fix", language, tools=", ".join(names[:5])),
        )
        return ToolCallFinding(kind="tool_name", confidence=0.95, evidence=evidence, correction=correction)


_ONE_OBJECT = "send the arguments as one JSON object"


def _arguments(arguments: Mapping[str, Any] | str) -> Mapping[str, Any] | ToolCallFinding:
    """The arguments as an object, or the finding that they are not one (beyond the source, which takes a dict)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            where = f" ({exc.msg} at character {exc.pos})" if isinstance(exc, json.JSONDecodeError) else ""
            return parameter_finding(0.95, f"the arguments are not valid JSON{where}", _ONE_OBJECT)
    if not isinstance(arguments, Mapping):
        kind = _with_article(_type_name(arguments))
        return parameter_finding(0.95, f"the arguments are JSON {kind}, not an object", _ONE_OBJECT)
    return arguments
