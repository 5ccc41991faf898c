"""Tool-call checks: every finding kind, the correction message and the check-tools command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from debate.prefilter import (
    AllowListChecker,
    PermissionChecker,
    ToolCallChecker,
    ToolRegistry,
    correction_message,
)

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
    assert finding.correction == "call 'get_weather'"


def test_unknown_tool_lists_the_available_ones(checker: ToolCallChecker) -> None:
    [finding] = checker.check("launch_rockets", {})
    assert (finding.kind, finding.confidence) == ("tool_name", 0.95)
    assert "delete_user, get_weather, http_get" in finding.correction


def test_parameter_findings(checker: ToolCallChecker) -> None:
    findings = checker.check(
        "get_weather",
        {"days": 0, "unit": "kelvin", "colour": "red", "options": {}, "tags": ["ok", 3]},
    )
    by_text = {f.evidence: (f.kind, f.confidence) for f in findings}
    assert by_text == {
        "unknown parameter 'colour'": ("parameter", 0.8),
        "missing required parameter 'city'": ("parameter", 0.95),
        "'days'=0 is below the minimum 1": ("parameter", 0.9),
        '\'unit\'="kelvin" is not one of ["celsius", "fahrenheit"]': ("parameter", 0.95),
        "missing required parameter 'options.hourly'": ("parameter", 0.95),
        "'tags[1]' is an integer, the schema wants string": ("parameter", 0.9),
    }
    colour = next(f for f in findings if "colour" in f.evidence)
    assert colour.correction == "use only the allowed parameters: city, days, options, tags, unit"


def test_above_maximum_and_wrong_types(checker: ToolCallChecker) -> None:
    findings = checker.check("get_weather", {"city": 7, "days": 30})
    assert [f.evidence for f in findings] == [
        "'city' is an integer, the schema wants string",
        "'days'=30 is above the maximum 14",
    ]
    [boolean] = checker.check("get_weather", {"city": "x", "days": True})
    assert boolean.evidence == "'days' is a boolean, the schema wants integer"


def test_unparseable_arguments(checker: ToolCallChecker) -> None:
    [finding] = checker.check("get_weather", "{city: Paris}")
    assert finding.kind == "parameter" and "not valid JSON" in finding.evidence


def test_fact_checkers_run_after_schema_checks() -> None:
    checker = ToolCallChecker(
        ToolRegistry.from_openai(TOOLS),
        fact_checkers=[
            AllowListChecker(tool="http_get", parameter="url", allowed=["https://api.example.com/"]),
            PermissionChecker(required={"delete_user": "admin"}, granted={"read"}),
        ],
    )
    assert checker.check("http_get", {"url": "https://api.example.com/v1/items"}) == []
    [fact] = checker.check("http_get", {"url": "https://evil.example.net/"})
    assert (fact.kind, fact.confidence) == ("fact", 0.9) and "allow-list" in fact.evidence
    [perm] = checker.check("delete_user", {"user_id": 1})
    assert (perm.kind, perm.confidence) == ("fact", 0.95) and "'admin'" in perm.evidence


def test_correction_message_lists_every_fix(checker: ToolCallChecker) -> None:
    message = correction_message(checker.check("get_weather", {"days": 0}))
    assert message.splitlines()[0] == "Your tool call was not executed because it has problems:"
    assert "1. missing required parameter 'city'. Fix: provide 'city'." in message
    assert "2. 'days'=0 is below the minimum 1. Fix: use a value >= 1 for 'days'." in message
    assert correction_message([]) == "The tool call passed all checks."


def test_registry_rejects_duplicates_and_malformed_definitions() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        ToolRegistry.from_openai([{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValueError, match="tool definition 1"):
        ToolRegistry.from_openai([{"name": "a"}, {"nope": True}])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, timeout=60)


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
        "missing required parameter 'city'",
        "'days'=99 is above the maximum 14",
    ]
    broken = _cli("check-tools", "--registry", str(tmp_path / "missing.json"), "--call", str(good))
    assert broken.returncode == 2 and "cannot read" in broken.stderr
