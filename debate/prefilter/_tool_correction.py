"""Tool-call self-correction: the findings said to the agent in the source's words, and the loop that sends them to
the agent's own model and checks the call it answers with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from debate.calls import load_json_object, load_prompt
from debate.errors import DebateError, ReplyUnusableError
from debate.llm import ChatClient, ChatMessage, ChatRequest
from debate.prefilter._tool_messages import MessageLanguage, message
from debate.prefilter._tools import ToolCallChecker, ToolRegistry, parameter_finding
from debate.types import CorrectionResult, ToolCall, ToolCallFinding

__all__ = ["correction_message", "self_correct"]


def correction_message(findings: Sequence[ToolCallFinding], language: MessageLanguage = "en") -> str:
    """Feedback for the agent, built as the source's `_build_correction_prompt` builds it: an opening line, a blank
    line, "- evidence" and "  Suggestion: correction" per finding, a blank line and the closing request."""
    if not findings:
        return message("passed", language)
    lines = [message("intro", language), ""]
    for finding in findings:
        lines.append(f"- {finding.evidence}")
        if finding.correction:
            lines.append(f"  {message('suggestion', language)}: {finding.correction}")
    return "\n".join([*lines, "", message("outro", language)])


_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
    "required": ["name", "arguments"],
}


def _parse_call(text: str) -> ToolCall:
    raw = load_json_object(text)
    body = raw.get("function", raw)
    if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
        raise ReplyUnusableError('the reply is not a tool call {"name": ..., "arguments": {...}}')
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict | str):
        raise ReplyUnusableError('"arguments" must be a JSON object')
    return ToolCall(name=body["name"], arguments=arguments)


def _tools_json(registry: ToolRegistry, name: str) -> str:
    chosen = [registry.tools[name]] if name in registry.tools else list(registry.tools.values())
    return json.dumps([t.model_dump() for t in chosen], ensure_ascii=False)


def _call_request(messages: Sequence[ChatMessage]) -> ChatRequest:
    return ChatRequest(
        messages=list(messages), response_schema=_CALL_SCHEMA, schema_name="tool_call", purpose="tool_correction"
    )


async def self_correct(
    checker: ToolCallChecker,
    call: ToolCall,
    client: ChatClient,
    *,
    context: Sequence[ChatMessage] = (),
    max_attempts: int = 1,
    prompts_dir: str | None = None,
) -> CorrectionResult:
    """Check `call`; when it has findings, send the correction to the agent's own model (`client`, continuing
    `context`, the agent's conversation so far) and return its reply as the suggestion (the tool-call checks,
    "自修正機制": one attempt). Unlike the seed we also check the new call; `max_attempts` > 1 (a named departure)
    keeps correcting while it still has findings.

    A reply that is not a tool call counts as an attempt and is answered with what was wrong. An endpoint failure
    ends the loop with `error` set (the seed's `corrected: False, error`)."""
    findings = checker.check(call.name, call.arguments)
    if not findings:
        passed = correction_message([], checker.language)
        return CorrectionResult(
            corrected=call, original=call, suggestion=None, feedback=passed, attempts=0, findings=[]
        )
    prompt = load_prompt("tool_correction", prompts_dir)
    messages = [*context, ChatMessage(role="assistant", content=call.model_dump_json())]
    current, feedback, reply = call, correction_message(findings, checker.language), None
    for attempt in range(1, max_attempts + 1):
        _, user = prompt.render(correction=feedback, tools=_tools_json(checker.registry, current.name))
        messages.append(ChatMessage(role="user", content=user))
        try:
            response = await client.complete(_call_request(messages))
        except DebateError as exc:
            return CorrectionResult(
                corrected=None,
                original=call,
                suggestion=reply,
                feedback=feedback,
                attempts=attempt - 1,
                findings=findings,
                error=str(exc),
            )
        reply = response.text
        messages.append(ChatMessage(role="assistant", content=reply))
        try:
            current = _parse_call(reply)
        except ReplyUnusableError as exc:
            findings = [parameter_finding(0.95, f"the reply is not a tool call ({exc})", "reply with one tool call")]
            feedback = correction_message(findings, checker.language)
            continue
        findings = checker.check(current.name, current.arguments)
        if not findings:
            await client.accept(response)
            return CorrectionResult(
                corrected=current, original=call, suggestion=reply, feedback=feedback, attempts=attempt, findings=[]
            )
        feedback = correction_message(findings, checker.language)
    return CorrectionResult(
        corrected=None, original=call, suggestion=reply, feedback=feedback, attempts=max_attempts, findings=findings
    )
