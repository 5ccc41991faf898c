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
from pydantic import ValidationError as PydanticValidationError

from debate.errors import InputError, validation_problem
from debate.files import read_json_file
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
            try:
                tools.append(ToolDefinition.model_validate(body))
            except PydanticValidationError as exc:
                raise InputError(f"tool definition {index}: {validation_problem(exc)}") from exc
        return cls(tools)

    @classmethod
    def from_file(cls, path: str | Path, where: str = "tool definitions") -> ToolRegistry:
        """From a JSON file of such definitions (or `{"tools": [...]}`); errors name `where` and the place."""
        data = read_json_file(path, where)
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


def _finding(error: ValidationError, language: MessageLanguage = "en") -> list[ToolCallFinding]:
    """One jsonschema error as findings in our words (the library's message for the rarer keywords)."""
    path, value, rule = _path(error), error.instance, error.validator
    rule_value: Any = error.validator_value
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    where = f"{path!r}" if path else message("the_arguments", language)
    prefix = f"{path}." if path else ""

    def one(confidence: float, key: str, **values: object) -> list[ToolCallFinding]:
        return [
            parameter_finding(confidence, message(key, language, **values), message(f"{key}_fix", language, **values))
        ]

    if rule == "required":
        present = error.instance if isinstance(error.instance, Mapping) else {}
        return [f for k in rule_value if k not in present for f in one(0.95, "missing", name=repr(prefix + k))]
    if rule == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        extra = [k for k in value if k not in allowed] if isinstance(value, Mapping) else []
        fix = message("undefined_fix", language, allowed=", ".join(allowed) or "(none)")
        return [parameter_finding(0.8, message("extra", language, name=repr(prefix + k)), fix) for k in extra]
    if rule == "type":
        return one(0.9, "type", where=where, kind=_with_article(_type_name(value)), wanted=rule_value)
    if rule == "enum":
        return one(0.95, "enum_nested", where=where, value=json.dumps(value), options=json.dumps(rule_value))
    if rule in ("minimum", "exclusiveMinimum"):
        return one(0.9, "below_nested", where=where, value=value, limit=rule_value)
    if rule in ("maximum", "exclusiveMaximum"):
        return one(0.9, "above_nested", where=where, value=value, limit=rule_value)
    return one(0.85, "schema", where=where, detail=error.message, rule=rule)


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
        parsed = _arguments(arguments, self.language)
        if isinstance(parsed, ToolCallFinding):
            return [parsed]
        errors = sorted(
            (e for e in self._validators[name].iter_errors(parsed) if _beyond_the_seed(e)),
            key=lambda e: (e.validator != "required", list(map(str, e.absolute_path))),
        )
        findings = _seed_parameters(tool.parameters, parsed, self.language)
        findings.extend(finding for error in errors for finding in _finding(error, self.language))
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


def _arguments(
    arguments: Mapping[str, Any] | str, language: MessageLanguage = "en"
) -> Mapping[str, Any] | ToolCallFinding:
    """The arguments as an object, or the finding that they are not one (beyond the source, which takes a dict)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            detail = f" ({exc.msg} at character {exc.pos})" if isinstance(exc, json.JSONDecodeError) else ""
            evidence = message("not_json", language, detail=detail)
            return parameter_finding(0.95, evidence, message("one_object", language))
    if not isinstance(arguments, Mapping):
        kind = _with_article(_type_name(arguments))
        return parameter_finding(0.95, message("not_object", language, kind=kind), message("one_object", language))
    return arguments
