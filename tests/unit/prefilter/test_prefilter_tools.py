"""Tool-call checks: every finding kind, the correction message and the check-tools command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from debate.prefilter import (
    APIEndpointChecker,
    DestructiveActionChecker,
    ToolCall,
    ToolCallChecker,
    ToolRegistry,
    correction_message,
    self_correct,
)
from debate.testing import ScriptedChatClient

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "options": {
                        "type": "object",
                        "properties": {"hourly": {"type": "boolean"}},
                        "required": ["hourly"],
                    },
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["city"],
            },
        },
    },
    {
        "name": "http_get",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    },
    {"name": "delete_user", "parameters": {"type": "object", "properties": {"user_id": {"type": "integer"}}}},
]


@pytest.fixture
def checker() -> ToolCallChecker:
    return ToolCallChecker(ToolRegistry.from_openai(TOOLS))


def test_valid_call_has_no_findings(checker: ToolCallChecker) -> None:
    assert (
        checker.check("get_weather", {"city": "Paris", "days": 3, "unit": "celsius", "options": {"hourly": True}}) == []
    )
    assert checker.check("get_weather", '{"city": "Paris", "tags": ["a"]}') == []


def test_misspelled_tool_gets_the_closest_name(checker: ToolCallChecker) -> None:
    [finding] = checker.check("get_wether", {"city": "Paris", "bogus": 1})  # stops at the name
    assert (finding.kind, finding.confidence) == ("tool_name", 0.9)
    assert (finding.evidence, finding.correction) == (
        "tool 'get_wether' does not exist",
        "you may have meant to call 'get_weather'",
    )


def test_unknown_tool_lists_the_available_ones(checker: ToolCallChecker) -> None:
    [finding] = checker.check("launch_rockets", {})
    assert (finding.kind, finding.confidence) == ("tool_name", 0.95)
    assert finding.correction == "available tools: get_weather, http_get, delete_user"  # registry order


def test_parameter_findings(checker: ToolCallChecker) -> None:
    findings = checker.check(
        "get_weather",
        {"days": 0, "unit": "kelvin", "colour": "red", "options": {}, "tags": ["ok", 3]},
    )
    # The tool-call source's parameter layer first, in the call's order; then the schema checks beyond it.
    assert [(f.evidence, f.confidence) for f in findings] == [
        ("parameter 'days' value 0 is less than the minimum 1", 0.9),
        ("parameter 'unit' value 'kelvin' is not in the allowed list", 0.95),
        ("parameter 'colour' is not in the tool definition", 0.8),
        ("missing required parameter 'city'", 0.95),
        ("missing required parameter 'options.hourly'", 0.95),
        ("'tags[1]' is an integer, the schema wants string", 0.9),
    ]
    assert all(f.kind == "parameter" for f in findings)
    colour = next(f for f in findings if "colour" in f.evidence)
    assert colour.correction == "allowed parameters: ['city', 'days', 'unit', 'options', 'tags']"


def test_above_maximum_and_wrong_types(checker: ToolCallChecker) -> None:
    findings = checker.check("get_weather", {"city": 7, "days": 30})
    assert [f.evidence for f in findings] == [
        "parameter 'days' value 30 is greater than the maximum 14",
        "'city' is an integer, the schema wants string",
    ]
    [boolean] = checker.check("get_weather", {"city": "x", "days": True})
    assert boolean.evidence == "'days' is a boolean, the schema wants integer"


def test_unparseable_arguments(checker: ToolCallChecker) -> None:
    [finding] = checker.check("get_weather", "{city: Paris}")
    assert finding.kind == "parameter" and "not valid JSON" in finding.evidence


def test_the_named_departures_prefix_endpoints_and_destructive_actions() -> None:
    tools = [
        *TOOLS,
        {
            "name": "run_sql",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "action": {"type": "string"}}},
        },
    ]
    checker = ToolCallChecker(
        ToolRegistry.from_openai(tools),
        fact_checkers=[
            APIEndpointChecker(["https://api.example.com/"], match="prefix"),
            DestructiveActionChecker(granted={"read"}),
        ],
    )
    assert checker.check("http_get", {"url": "https://api.example.com/v1/items"}) == []
    [fact] = checker.check("http_get", {"url": "https://evil.example.net/"})
    assert (fact.kind, fact.confidence) == ("fact", 0.85) and "does not exist in the knowledge base" in fact.evidence
    assert checker.check("run_sql", {"query": "SELECT * FROM users"}) == []
    [drop] = checker.check("run_sql", {"query": "drop table users"})
    assert (drop.kind, drop.confidence) == ("fact", 0.9) and "DROP" in drop.evidence and "'db:write'" in drop.evidence
    [delete] = checker.check("run_sql", {"action": "delete"})
    assert "DELETE" in delete.evidence
    allowed = ToolCallChecker(ToolRegistry.from_openai(tools), fact_checkers=[DestructiveActionChecker({"db:write"})])
    assert allowed.check("run_sql", {"query": "DELETE FROM t"}) == []


def test_parameters_are_validated_by_jsonschema() -> None:
    """pattern, minLength, anyOf and $ref: keywords a hand-written subset ignored."""
    schema = {
        "type": "object",
        "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "properties": {
            "currency": {"$ref": "#/$defs/code"},
            "note": {"type": "string", "minLength": 3},
            "amount": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]},
        },
        "required": ["currency"],
    }
    checker = ToolCallChecker(ToolRegistry.from_openai([{"name": "pay", "parameters": schema}]))
    assert checker.check("pay", {"currency": "EUR", "note": "rent", "amount": "12"}) == []
    findings = checker.check("pay", {"currency": "euro", "note": "x", "amount": "ten"})
    evidence = " | ".join(f.evidence for f in findings)
    assert len(findings) == 3 and all(f.kind == "parameter" and f.confidence == 0.85 for f in findings)
    assert "'currency'" in evidence and "does not match" in evidence
    assert "'note'" in evidence and "too short" in evidence
    assert "'amount'" in evidence
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        ToolRegistry.from_openai([{"name": "bad", "parameters": {"type": "objekt"}}])


def _call(name: str, **arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


async def test_self_correction_sends_the_findings_and_rechecks() -> None:
    checker = ToolCallChecker(ToolRegistry.from_openai(TOOLS))
    client = ScriptedChatClient(
        {
            "tool_correction": [
                "I will fix it",
                _call("get_weather", city="Paris", days=40),
                _call("get_weather", city="Paris", days=4),
            ]
        }
    )
    original = ToolCall(name="get_wether", arguments={"city": "Paris", "days": 4})
    result = await self_correct(checker, original, client, max_attempts=3)  # the named departure: 3 attempts
    assert result.corrected == ToolCall(name="get_weather", arguments={"city": "Paris", "days": 4})
    assert (result.original, result.attempts, result.findings) == (original, 3, [])
    assert "maximum 14" in result.feedback and result.suggestion == _call("get_weather", city="Paris", days=4)
    first, second = client.calls[0].request, client.calls[1].request
    assert "call 'get_weather'" in first.messages[-1].content and first.messages[-2].role == "assistant"
    assert "not a tool call" in second.messages[-1].content  # the unusable reply was answered with what was wrong
    assert len(client.accepted) == 1


async def test_self_correction_is_bounded_and_a_valid_call_costs_nothing() -> None:
    checker = ToolCallChecker(ToolRegistry.from_openai(TOOLS))
    client = ScriptedChatClient({"tool_correction": [_call("get_weather", days=0)] * 2})
    result = await self_correct(checker, ToolCall(name="get_weather", arguments={}), client, max_attempts=2)
    assert result.corrected is None and result.attempts == 2 and client.remaining == 0
    assert [f.evidence for f in result.findings] == [
        "parameter 'days' value 0 is less than the minimum 1",
        "missing required parameter 'city'",
    ]
    untouched = ScriptedChatClient({"tool_correction": []})
    valid = ToolCall(name="get_weather", arguments={"city": "Oslo"})
    done = await self_correct(checker, valid, untouched)
    assert (done.corrected, done.attempts, untouched.calls) == (valid, 0, [])


def test_correction_message_lists_every_fix(checker: ToolCallChecker) -> None:
    message = correction_message(checker.check("get_weather", {"days": 0}))
    assert message.splitlines() == [
        "I found the following problems in your last message, please try again:",
        "",
        "- parameter 'days' value 0 is less than the minimum 1",
        "  Suggestion: please use a value not less than 1",
        "- missing required parameter 'city'",
        "  Suggestion: provide 'city'",
        "",
        "Please call the correct tool again.",
    ]
    assert correction_message([]) == "The tool call passed all checks."


def test_registry_rejects_duplicates_and_malformed_definitions() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        ToolRegistry.from_openai([{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValueError, match="tool definition 1"):
        ToolRegistry.from_openai([{"name": "a"}, {"nope": True}])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow  # runs the `debate` command
def test_check_tools_command(tmp_path: Path) -> None:
    registry = tmp_path / "tools.json"
    registry.write_text(json.dumps(TOOLS))
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}))
    # OpenAI tool_call shape, arguments as a JSON string.
    bad.write_text(json.dumps({"function": {"name": "get_weather", "arguments": json.dumps({"days": 99})}}))
    ok = _cli("check-tools", "--registry", str(registry), "--call", str(good))
    assert ok.returncode == 0 and "no findings" in ok.stdout
    found = _cli("check-tools", "--registry", str(registry), "--call", str(bad), "--json")
    assert found.returncode == 1
    assert [f["evidence"] for f in json.loads(found.stdout)] == [
        "parameter 'days' value 99 is greater than the maximum 14",
        "missing required parameter 'city'",
    ]
    chinese = _cli("check-tools", "--registry", str(registry), "--call", str(bad), "--language", "zh")
    assert chinese.returncode == 1
    assert "参数 'days' 值 99 大于最大值 14" in chinese.stdout and "请重新调用正确的工具。" in chinese.stdout
    fetch = tmp_path / "fetch.json"
    fetch.write_text(json.dumps({"name": "http_get", "arguments": {"url": "https://evil.example.net/x"}}))
    audited = _cli(
        "check-tools",
        "--registry",
        str(registry),
        "--call",
        str(fetch),
        "--json",
        "--allow-endpoint",
        "https://api.example.com/",
        "--endpoint-match",
        "prefix",
    )
    assert audited.returncode == 1 and json.loads(audited.stdout)[0]["confidence"] == 0.85
    exact = _cli(
        "check-tools",
        "--registry",
        str(registry),
        "--call",
        str(fetch),
        "--json",
        "--allow-endpoint",
        "https://api.example.com/",
    )
    assert exact.returncode == 0  # seed 003 checks only an api_call's endpoint
    broken = _cli("check-tools", "--registry", str(tmp_path / "missing.json"), "--call", str(good))
    assert broken.returncode == 2 and "cannot read" in broken.stderr
