"""Where a request body that does not parse went wrong, by byte offset: FastAPI says only "There was an error
parsing the body" for invalid UTF-8, nesting past the parser's depth and integers past Python's digit limit, and
gives a character (not byte) position for JSON syntax errors."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import anyio.to_thread
from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from markov_debate.desk.requests import MAX_DEPTH

__all__ = ["PARSE_FAILED", "OffLoopJson", "body_problem", "json_syntax_problem"]

OFF_LOOP_BYTES = 64 * 1024
"""A JSON body above this is parsed in a worker thread: a 10 MB body took over a second of the event loop, and
every other request (health included) waited behind it."""

PARSE_FAILED = "There was an error parsing the body"
"""FastAPI's detail for a body its JSON reader raised on (other than a syntax error)."""


def body_problem(body: bytes, cause: BaseException | None) -> str:
    """The reason a body did not parse, naming the byte where it can."""
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not valid UTF-8 at byte {cause.start} (send JSON as UTF-8)"
    if isinstance(cause, RecursionError):
        offset = _too_deep_at(body)
        where = f" at byte {offset}" if offset is not None else ""
        return f"body: nested too deeply to read{where} (the desk reads requests up to {MAX_DEPTH} levels deep)"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        limit = sys.get_int_max_str_digits()
        found = re.search(rb"\d{%d,}" % (limit + 1), body)
        where = f" at byte {found.start()}" if found else ""
        return f"body: a number{where} has more than {limit} digits, which is not read"
    reason = f" ({type(cause).__name__})" if cause is not None else ""
    return f"body: could not be read as JSON{reason}"


def json_syntax_problem(body: bytes, position: int, reason: str) -> str:
    """A JSON syntax error at character `position` of the decoded body, as a byte offset with line and column."""
    text = body.decode("utf-8", errors="replace")
    offset = len(text[:position].encode("utf-8", errors="replace"))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"body: not valid JSON at byte {offset} (line {line}, column {column}): {reason}"


def _too_deep_at(body: bytes, limit: int = MAX_DEPTH) -> int | None:
    """The byte where nesting first passes `limit` levels (outside strings)."""
    depth, in_string, escaped = 0, False, False
    for offset, byte in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return offset
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return None


class OffLoopJson(APIRoute):
    """A route whose JSON body, when large, is parsed in a thread; FastAPI then finds it parsed (Starlette keeps a
    request's parsed JSON), and a body that does not parse fails as FastAPI's own reading would."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def parsed_first(request: Request) -> Response:
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "application/json" or kind.endswith("+json"):
                body = await request.body()
                if len(body) > OFF_LOOP_BYTES:
                    request._json = await anyio.to_thread.run_sync(_loads, body)
            return await handler(request)

        return parsed_first


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": exc.msg}}], body=exc.doc) from exc
    except Exception as exc:  # what FastAPI's reader turns into its 400 (body_problem names the cause)
        raise HTTPException(400, PARSE_FAILED) from exc
