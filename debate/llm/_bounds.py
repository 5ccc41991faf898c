"""String bounds for grammar-constrained decoding, and the completion length such a schema can need.

A small model under a grammar can write one string until the token limit cuts it, leaving no JSON object at all.
Bounding every string in the schema closes the string in time, and a token limit at least the schema's worst case
then always leaves room for the rest of the object.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["bounded_strings", "worst_case_tokens"]

_WHITESPACE = 22
"""Whitespace llama.cpp's JSON grammar allows between two tokens of an object (a newline and up to 20 indents)."""
_SCALAR = {"boolean": 5, "null": 4, "number": 24}


def bounded_strings(schema: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """A copy of `schema` in which every string is at most `max_chars` characters (tighter bounds are kept)."""
    bounded = copy.deepcopy(schema)
    _bound(bounded, max_chars)
    return bounded


def _bound(node: Any, max_chars: int) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string":
            node["maxLength"] = min(int(node.get("maxLength", max_chars)), max_chars)
        for value in node.values():
            _bound(value, max_chars)
    elif isinstance(node, list):
        for value in node:
            _bound(value, max_chars)


def worst_case_tokens(schema: dict[str, Any]) -> int | None:
    """The longest reply the schema allows, counted as one token per character (a tokenizer's worst case); None
    when something in it is unbounded (a string without maxLength, an array without maxItems)."""
    kind = schema.get("type")
    if kind == "object":
        total = 2 + _WHITESPACE
        for key, value in schema.get("properties", {}).items():
            inner = worst_case_tokens(value) if isinstance(value, dict) else None
            if inner is None:
                return None
            total += len(key) + 4 + 2 * _WHITESPACE + inner
        return total
    if kind == "array":
        items, count = schema.get("items"), schema.get("maxItems")
        inner = worst_case_tokens(items) if isinstance(items, dict) else None
        if inner is None or count is None:
            return None
        return 2 + _WHITESPACE + int(count) * (inner + 1 + _WHITESPACE)
    if kind == "string":
        return int(schema["maxLength"]) + 2 if "maxLength" in schema else None
    if kind == "integer":
        bounds = [schema.get("minimum"), schema.get("maximum")]
        return max(len(str(b)) for b in bounds) if None not in bounds else 20
    return _SCALAR.get(str(kind))
