"""The tool-call source's layers 1 and 2 (`../shared/seeds/003-tool-call-checks.md`, ToolNameHallucinationDetector
and ParameterHallucinationDetector) against our checker on generated registries and calls: the same findings, in
the same order, with the same words (language zh is the source's text exactly). The oracle below restates the
source's rules as a test; what our checker adds beyond them (the JSON-schema checks) is left out of the
comparison by name."""

from __future__ import annotations

import random
import re
from difflib import SequenceMatcher
from typing import Any

from debate.prefilter import ToolCallChecker, ToolRegistry, correction_message
from debate.prefilter._tool_messages import message
from debate.types import ToolCallFinding

Finding = tuple[str, float, str, str]


def _oracle(tools: dict[str, dict[str, Any]], name: str, parameters: dict[str, Any]) -> list[Finding]:
    """The source's detect_all for layers 1 and 2, rule for rule (its Chinese messages)."""
    if name not in tools:
        available = list(tools)
        matches = sorted(
            ((t, SequenceMatcher(None, name, t).ratio()) for t in available), key=lambda m: m[1], reverse=True
        )
        if matches and matches[0][1] > 0.6:
            return [("tool_name", 0.9, f"工具 '{name}' 不存在", f"您可能想调用 '{matches[0][0]}'")]
        return [("tool_name", 0.95, f"工具 '{name}' 完全不存在", f"可用工具: {', '.join(available[:5])}")]
    schema = tools[name]
    results: list[Finding] = []
    for param_name, param_value in parameters.items():
        if param_name not in schema.get("properties", {}):
            results.append(
                (
                    "parameter",
                    0.8,
                    f"参数 '{param_name}' 未在工具定义中",
                    f"允许的参数: {list(schema['properties'].keys())}",
                )
            )
            continue
        prop_def = schema["properties"][param_name]
        if "minimum" in prop_def or "maximum" in prop_def:
            if isinstance(param_value, int | float):
                min_val, max_val = prop_def.get("minimum"), prop_def.get("maximum")
                if min_val is not None and param_value < min_val:
                    results.append(
                        (
                            "parameter",
                            0.9,
                            f"参数 '{param_name}' 值 {param_value} 小于最小值 {min_val}",
                            f"请使用不小于 {min_val} 的值",
                        )
                    )
                if max_val is not None and param_value > max_val:
                    results.append(
                        (
                            "parameter",
                            0.9,
                            f"参数 '{param_name}' 值 {param_value} 大于最大值 {max_val}",
                            f"请使用不大于 {max_val} 的值",
                        )
                    )
        if "enum" in prop_def and param_value not in prop_def["enum"]:
            results.append(
                (
                    "parameter",
                    0.95,
                    f"参数 '{param_name}' 值 '{param_value}' 不在允许列表中",
                    f"允许的值: {prop_def['enum']}",
                )
            )
    return results


VALUES: list[Any] = [True, False, 1, 0, 5, -3, 2.5, 100, "true", "1", "", None, "celsius", "kelvin", [1], {"a": 1}]
RULES: list[dict[str, Any]] = [
    {"type": "integer", "minimum": 1, "maximum": 14},
    {"type": "number", "minimum": 0},
    {"maximum": 10},
    {"type": "boolean"},
    {"enum": ["celsius", "fahrenheit"]},
    {"enum": [1, 2, 3]},
    {"enum": [True]},
    {"enum": [None, "x"]},
    {"type": "string"},
    {"minimum": 0, "enum": [0, 1]},
    {},
]
NAMES = ["get_weather", "get_news", "search", "send_email", "read_file", "delete_database", "api_call"]


def _registry(rng: random.Random) -> dict[str, dict[str, Any]]:
    tools = {}
    for name in rng.sample(NAMES, rng.randint(1, len(NAMES))):
        props = {f"p{i}": rng.choice(RULES) for i in range(rng.randint(0, 4))}
        tools[name] = {"type": "object", "properties": props}
    return tools


_BEYOND = (
    "missing",
    "extra",
    "type",
    "enum_nested",
    "below_nested",
    "above_nested",
    "schema",
    "not_json",
    "not_object",
)
"""Our messages for the schema checks beyond the source's (their Chinese is ours, not the source's)."""


def _template(key: str) -> re.Pattern[str]:
    names = ("name", "where", "kind", "wanted", "value", "options", "limit", "detail", "rule")
    text = message(key, "zh", **{n: "\0" for n in names})
    return re.compile(".*".join(re.escape(part) for part in text.split("\0")) + "$", re.S)


_BEYOND_TEMPLATES = [_template(key) for key in _BEYOND]


def _ours(checker: ToolCallChecker, name: str, parameters: dict[str, Any]) -> list[Finding]:
    findings: list[ToolCallFinding] = checker.check(name, parameters)
    # Beyond the source: the schema library's findings (types, required, ...) are left out.
    return [
        (f.kind, f.confidence, f.evidence, f.correction)
        for f in findings
        if not any(t.match(f.evidence) for t in _BEYOND_TEMPLATES)
    ]


def test_layers_1_and_2_match_the_source_on_generated_calls() -> None:
    rng = random.Random(3)
    mismatches = []
    for _ in range(1000):
        tools = _registry(rng)
        checker = ToolCallChecker(
            ToolRegistry.from_openai([{"name": n, "parameters": s} for n, s in tools.items()]), language="zh"
        )
        name = rng.choice([*tools, *NAMES, "get_wether", "serch", "launch_rockets"])
        schema = tools.get(name, {"properties": {}})
        keys = [*schema["properties"], "bogus", "p9"]
        call = {k: rng.choice(VALUES) for k in rng.sample(keys, rng.randint(0, len(keys)))}
        expected, got = _oracle(tools, name, call), _ours(checker, name, call)
        if expected != got:
            mismatches.append((tools, name, call, expected, got))
    assert mismatches[:3] == []


def test_the_edge_cases_the_source_decides_by_python_semantics() -> None:
    """A boolean is a number for the range check (True is 1) and equals 1 for the enum; a string "true" or None is
    no number, so no range finding; None outside an enum is a finding."""
    tools = {
        "t": {"type": "object", "properties": {"n": {"minimum": 2}, "e": {"enum": [1, 2]}, "b": {"type": "boolean"}}}
    }
    checker = ToolCallChecker(ToolRegistry.from_openai([{"name": "t", "parameters": tools["t"]}]), language="zh")
    assert _ours(checker, "t", {"n": True}) == _oracle(tools, "t", {"n": True}) != []
    assert _ours(checker, "t", {"e": True}) == [] == _oracle(tools, "t", {"e": True})
    assert _ours(checker, "t", {"n": "true", "b": "true"}) == [] == _oracle(tools, "t", {"n": "true", "b": "true"})
    assert len(_ours(checker, "t", {"e": None})) == 1
    english = ToolCallChecker(ToolRegistry.from_openai([{"name": "t", "parameters": tools["t"]}]))
    # Beyond the source, in English: the schema's type for "b" ("true" is a string, not a boolean).
    assert [f.evidence for f in english.check("t", {"b": "true"})] == ["'b' is a string, the schema wants boolean"]
    # ... and in Chinese when the findings are asked in Chinese (issue 43: they stayed English).
    assert [f.evidence for f in checker.check("t", {"b": "true"})] == ["'b' 的类型是 a string,定义要求 boolean"]


def test_the_correction_message_is_the_sources_in_zh() -> None:
    checker = ToolCallChecker(ToolRegistry.from_openai([{"name": "get_weather", "parameters": {}}]), language="zh")
    findings = checker.check("send_email_to_ceo", {"message": "Hello"})
    assert correction_message(findings, "zh") == (
        "我发现您上一条消息中存在以下问题,请重新尝试:\n\n"
        "- 工具 'send_email_to_ceo' 完全不存在\n  建议: 可用工具: get_weather\n"
        "\n请重新调用正确的工具。"
    )
