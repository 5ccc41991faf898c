"""Tolerant parsing of agent replies into an Opinion. Tolerant of format, never of meaning: no guessing a verdict."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import ValidationError

from debate.errors import ReplyUnusableError
from debate.types import Opinion

__all__ = [
    "OPINION_FORMAT",
    "OPINION_FORMAT_THREE_WAY",
    "OPINION_SCHEMA",
    "OPINION_SCHEMA_THREE_WAY",
    "load_json_object",
    "parse_factuality",
    "parse_opinion",
]

OPINION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # No maxLength: llama.cpp expands a length bound into a grammar repetition that can crash its server on
        # large bounds; the completion token limit (ModelConfig.max_tokens) is the generous limit instead.
        "opinion": {"type": "string", "minLength": 1},
        "factuality": {"type": "boolean"},
        "Error severity": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["opinion", "factuality", "Error severity"],
    "additionalProperties": False,
}
"""The paper's reply format as a JSON schema, for endpoints that constrain decoding."""

OPINION_SCHEMA_THREE_WAY: dict[str, Any] = {
    **OPINION_SCHEMA,
    "properties": {**OPINION_SCHEMA["properties"], "enough evidence": {"type": "boolean"}},
}
"""The reply of a prompt that lets the agent say the evidence cannot decide (`not_enough_evidence = true`)."""

OPINION_FORMAT = (
    'a dictionary starting with "{" with exactly the keys "opinion" (your analysis and judgment), "factuality" '
    '(true or false) and "Error severity" (an integer 0-5)'
)
"""How the re-ask describes the expected reply."""

OPINION_FORMAT_THREE_WAY = (
    OPINION_FORMAT[: -len(' and "Error severity" (an integer 0-5)')]
    + ', "Error severity" (an integer 0-5) and, when the evidence can neither support nor refute the claim, '
    '"enough evidence": false'
)

_TRUE = {"true", "yes", "factual"}
_FALSE = {"false", "no", "non-factual", "nonfactual", "not factual"}


_OPEN_ATTEMPTS = 16
"""Opening braces tried as the start of the object, each a fresh scan: bounds the work on a reply of stray braces."""


def _string_step(ch: str, escaped: bool) -> tuple[bool, bool]:
    """Inside a JSON string: whether the string goes on after `ch`, and whether the next character is escaped."""
    if escaped:
        return True, False
    if ch == "\\":
        return True, True
    return ch != '"', False


def _balanced_from(text: str, start: int) -> str | None:
    """The first balanced {...} in one scan from `start` (strings respected). An object closing at depth 0 is
    returned at once; when the outermost brace never closes, the earliest-opened object that did close is."""
    opened: list[int] = []
    best: tuple[int, int] | None = None
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            in_string, escaped = _string_step(ch, escaped)
        elif ch == '"':
            in_string = True
        elif ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            begin = opened.pop()
            if not opened:
                return text[begin : i + 1]
            if best is None or begin < best[0]:
                best = (begin, i + 1)
    return text[best[0] : best[1]] if best else None


def _first_json_object(text: str) -> str | None:
    """The first balanced {...} span, respecting strings. Each scan is linear; a scan whose string state a stray
    quote broke is retried from the next brace, a bounded number of times."""
    start = text.find("{")
    for _ in range(_OPEN_ATTEMPTS):
        if start == -1:
            return None
        found = _balanced_from(text, start)
        if found is not None:
            return found
        start = text.find("{", start + 1)
    return None


def _fenced(text: str) -> str | None:
    """The body of the first ``` fence (```json too) that closes, found without a backtracking regex."""
    start = text.find("```")
    if start == -1:
        return None
    body = start + 3
    if text[body : body + 4].lower() == "json":
        body += 4
    end = text.find("```", body)
    return text[body:end].strip() if end != -1 else None


def _pythonish_to_json(candidate: str) -> str:
    """Fix the common near-JSON of small models: Python booleans and trailing commas (outside strings)."""
    out: list[str] = []
    in_string, escaped, i = False, False, 0
    while i < len(candidate):
        ch = candidate[i]
        if in_string:
            out.append(ch)
            in_string, escaped = _string_step(ch, escaped)
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
            continue
        for word, repl in (("True", "true"), ("False", "false"), ("None", "null")):
            if candidate.startswith(word, i) and not candidate[i + len(word) : i + len(word) + 1].isalnum():
                out.append(repl)
                i += len(word)
                break
        else:
            out.append(ch)
            i += 1
    return re.sub(r",\s*([}\]])", r"\1", "".join(out))


def load_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a reply (code fences, prose around it, Python-style literals tolerated)."""
    fenced = _fenced(text)
    candidate = (_first_json_object(fenced) if fenced else None) or _first_json_object(text)
    if candidate is None:
        raise ReplyUnusableError("the reply contains no JSON object")
    problem = "it is not an object"
    for fix in (None, _pythonish_to_json):  # the repair is costly and rarely needed: only when plain JSON fails
        try:
            # strict=False: a raw newline or tab inside a string is format, not meaning, and grammar-constrained
            # servers allow it (llama.cpp's JSON grammar takes any character but a quote or a backslash)
            value = json.loads(candidate if fix is None else fix(candidate), strict=False)
        except json.JSONDecodeError as exc:
            problem = f"{exc.msg} (character {exc.pos})"
            continue
        except (ValueError, RecursionError) as exc:  # an integer over Python's digit limit; nesting too deep
            problem = str(exc) or type(exc).__name__
            continue
        if isinstance(value, dict):
            return value
    literal = _python_literal(candidate)
    if isinstance(literal, dict):
        return {str(k): v for k, v in literal.items()}
    raise ReplyUnusableError(f"the JSON object does not parse: {problem}")


def _python_literal(candidate: str) -> object:
    """Small models often answer with a Python dict literal (single quotes); literal_eval evaluates no code. What
    it refuses (a set inside a dict key, `{{`, NUL, nesting too deep, a huge number) is no answer, never an error."""
    try:
        return ast.literal_eval(candidate)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, OverflowError):
        return None


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def parse_factuality(value: Any) -> bool:
    """A verdict as models write it (true/false, "True", yes/no); anything else is rejected."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    raise ReplyUnusableError(f'"factuality" must be true or false, got {json.dumps(value)}')


def _as_severity(value: Any) -> int:
    if isinstance(value, bool):
        raise ReplyUnusableError(f'"Error severity" must be an integer 0-5, got {json.dumps(value)}')
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[0-5]\s*(/\s*5)?\s*", value):
        number = int(value.strip()[0])
    else:
        raise ReplyUnusableError(f'"Error severity" must be an integer 0-5, got {json.dumps(value)}')
    if not 0 <= number <= 5:
        raise ReplyUnusableError(f'"Error severity" must be between 0 and 5, got {number}')
    return number


def parse_opinion(text: str) -> Opinion:
    """Parse `{"opinion", "factuality", "Error severity"}`, accepting key spellings and Python-style booleans."""
    raw = load_json_object(text)
    fields = {_normalise_key(k): v for k, v in raw.items()}
    missing = [name for name in ("opinion", "factuality", "error_severity") if name not in fields]
    if missing:
        shown = ", ".join('"Error severity"' if m == "error_severity" else f'"{m}"' for m in missing)
        raise ReplyUnusableError(f"the JSON object lacks {shown}")
    opinion = fields["opinion"]
    if not isinstance(opinion, str) or not opinion.strip():
        raise ReplyUnusableError('"opinion" must be a non-empty string')
    enough = fields.get("enough_evidence", True)
    if not isinstance(enough, bool):
        raise ReplyUnusableError(f'"enough evidence" must be true or false, got {json.dumps(enough)}')
    try:
        return Opinion(
            opinion=opinion.strip(),
            factuality=parse_factuality(fields["factuality"]),
            error_severity=_as_severity(fields["error_severity"]),
            enough_evidence=enough,
        )
    except ValidationError as exc:  # pragma: no cover - the checks above cover the model's constraints
        raise ReplyUnusableError(str(exc)) from exc
