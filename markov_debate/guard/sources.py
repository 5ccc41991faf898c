"""What a chat request gives the guard to check an answer against: its sources, and the question.

Two ways to send the sources, so a RAG application keeps building its requests as it does:
- a `sources` field in the body, `{id: text}` or `[{"id", "text", "parent_id"?}]` (the OpenAI clients' `extra_body`);
  the guard removes it before the request goes upstream;
- the retrieved passages in the system (or developer) and tool messages, each starting on a line with its id in
  brackets, `[doc-1] Paris is the capital of France.`; a passage runs to the next marker or the end of the message.
  A tool message without a marker is one source, named by its `tool_call_id`.
The answer cites them as `[doc-1]`. A `sources` field wins over the messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from debate.errors import InputError
from debate.types import Source

__all__ = ["GuardRequestError", "RequestText", "checkable", "read_request"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_MARKER = re.compile(r"^[ \t]*\[([A-Za-z0-9][A-Za-z0-9_.:\-]{0,63})\][ \t]*(.*)$")
_SOURCE_ROLES = ("system", "developer", "tool")
MAX_SOURCES = 200
"""The most sources one request may carry (a larger retrieval is cut, and the note says so)."""

Origin = Literal["field", "messages", "none"]


class GuardRequestError(InputError):
    """A request the guard cannot read; `param` names the field (the OpenAI error's `param`)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class RequestText:
    """What the guard reads from one chat request."""

    question: str | None
    """The last user message's text."""
    sources: list[Source]
    origin: Origin
    """Where the sources came from."""
    forwarded: dict[str, Any]
    """The body as it goes upstream (without `sources`)."""
    notes: tuple[str, ...] = ()


def checkable(text: str) -> str:
    """`text` as the checks read it: a lone surrogate (JSON allows `\\ud800`; it is no character) becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list (images and audio are not read)."""
    if isinstance(content, str):
        return checkable(content)
    if isinstance(content, list):
        return checkable(
            "\n".join(
                part["text"]
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            )
        )
    return ""


def _from_field(value: Any) -> list[Source]:
    if isinstance(value, Mapping):
        items: list[Any] = [{"id": k, "text": v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    else:
        raise GuardRequestError(
            "sources", f"expected {{id: text}} or a list of {{id, text}}, got {type(value).__name__}"
        )
    sources = []
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise GuardRequestError(f"sources[{n}]", f"expected an object {{id, text}}, got {type(item).__name__}")
        ident, text, parent = item.get("id"), item.get("text"), item.get("parent_id")
        if not isinstance(ident, str | int) or isinstance(ident, bool) or not str(ident).strip():
            raise GuardRequestError(f"sources[{n}].id", "expected a non-empty string")
        if not isinstance(text, str):
            raise GuardRequestError(f"sources[{n}].text", f"expected a string, got {type(text).__name__}")
        if parent is not None and not isinstance(parent, str):
            raise GuardRequestError(f"sources[{n}].parent_id", "expected a string")
        if text.strip():
            sources.append(Source(id=checkable(str(ident).strip()), text=checkable(text), parent_id=parent))
    return sources


def _from_messages(messages: list[Any]) -> list[Source]:
    sources: list[Source] = []
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _SOURCE_ROLES:
            continue
        text = _text(message.get("content"))
        found = _passages(text)
        if not found and message.get("role") == "tool" and text.strip():
            ident = message.get("tool_call_id")
            found = [(checkable(ident) if isinstance(ident, str) and ident.strip() else f"tool-{n}", text.strip())]
        sources.extend(Source(id=ident, text=body) for ident, body in found if body.strip())
    return sources


def _passages(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        marked = _MARKER.match(line)
        if marked:
            found.append((marked.group(1), [marked.group(2)]))
        elif found:
            found[-1][1].append(line)
    return [(ident, "\n".join(lines).strip()) for ident, lines in found]


def _question(messages: list[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _text(message.get("content")).strip() or None
    return None


def read_request(body: Any) -> RequestText:
    """The question and sources of a chat request, and the body to send upstream.

    Raises:
        GuardRequestError: the body is not a chat request, or its `sources` are malformed (naming the field).
    """
    if not isinstance(body, Mapping):
        raise GuardRequestError("body", f"expected a JSON object, got {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GuardRequestError("messages", "expected a non-empty list of messages")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        # The guard reads `stream` itself (whole or streamed): anything else would reach the upstream to be refused
        # there, after the guard had taken the request for a whole one.
        raise GuardRequestError("stream", f"expected true or false, got {json.dumps(stream)[:40]}")
    origin: Origin
    forwarded = {k: v for k, v in body.items() if k != "sources"}
    notes: list[str] = []
    if "sources" in body and body["sources"] is not None:
        sources, origin = _from_field(body["sources"]), "field"
    else:
        sources = _from_messages(messages)
        origin = "messages" if sources else "none"
    unique: dict[str, Source] = {}
    for source in sources:
        unique.setdefault(source.id, source)
    if len(unique) < len(sources):
        notes.append(f"{len(sources) - len(unique)} source(s) repeat an earlier id; the first of each is used")
    kept = list(unique.values())
    if len(kept) > MAX_SOURCES:
        notes.append(f"{len(kept)} sources; the first {MAX_SOURCES} are checked against")
        kept = kept[:MAX_SOURCES]
    return RequestText(_question(messages), kept, origin if kept else "none", forwarded, tuple(notes))
