"""The servers' log (`debate serve`, `debate worker`, `debate guard`): one format for every line, ours and uvicorn's,
on standard error, and a JSON form for log collectors.

    2026-11-28T21:48:31.123Z INFO markov_debate.ready: guard on http://127.0.0.1:8100/v1 ...
    {"time": "2026-11-28T21:48:31.123Z", "level": "INFO", "logger": "markov_debate.ready", "message": "guard on ..."}

A traceback uvicorn would print for a start-up that failed (the app's lifespan raised) is one line: the exception's
own, which says what to fix. The line saying the server is ready is written once it is: after its sockets are bound
and its start-up has finished, never before a start-up that then fails.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Coroutine
from typing import Any, Literal

from debate.cli.interrupts import write_interrupted_with

__all__ = [
    "LOG_FORMATS",
    "LogFormat",
    "announce",
    "configure_server_logging",
    "run_server",
    "serve_when_ready",
    "server_logging",
]

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
_READY = logging.getLogger("markov_debate.ready")
"""The lines an operator waits for (ready, stopping, stopped): at INFO, shown whatever --verbose says."""


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def _one_line(record: logging.LogRecord) -> str:
    """The record's message on one line: a traceback (uvicorn's failed start-up) as its last line, the exception
    that says what went wrong."""
    message = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        message = f"{message}: {type(exc).__name__}: {exc}" if message.strip() else f"{type(exc).__name__}: {exc}"
    if message.startswith("Traceback (most recent call last)"):
        lines = [line for line in message.splitlines() if line.strip()]
        message = lines[-1] if lines else message
    return " ".join(message.split("\n")).strip()


class TextFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{_timestamp(record)} {record.levelname} {record.name}: {_one_line(record)}"


class JsonFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": _one_line(record),
        }
        return json.dumps(entry, ensure_ascii=False)


_CONFIGURED: list[tuple[LogFormat, bool]] = []


def server_logging() -> tuple[LogFormat, bool] | None:
    """(form, verbose) as `configure_server_logging` set them in this process, or None: what a child process of
    the server (the guard's decision writer) configures its own log with, so its lines read as the server's."""
    return _CONFIGURED[0] if _CONFIGURED else None


def configure_server_logging(form: LogFormat, *, verbose: bool) -> None:
    """Every log record of the process to standard error in `form`: ours at WARNING (INFO with --verbose), the
    ready/stopping lines always, uvicorn's through the same handler (start uvicorn with `log_config=None`), and
    the line a SIGTERM or Ctrl-C ends the command with."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormat() if form == "json" else TextFormat())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler], force=True)
    _CONFIGURED[:] = [(form, verbose)]

    def last_line(line: str) -> None:
        # Written by the handler itself: the command has silenced logging (logging.disable) by then.
        handler.handle(logging.makeLogRecord({"name": _READY.name, "levelno": 30, "levelname": "WARNING", "msg": line}))

    write_interrupted_with(last_line)
    _READY.setLevel(logging.INFO)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.INFO if verbose else logging.WARNING)


def announce(message: str) -> None:
    """A line the operator waits for (ready, stopping, stopped), in the log's format."""
    _READY.info(message)


async def serve_when_ready(server: Any, ready: str) -> bool:
    """Run a uvicorn `server`; write `ready` once its sockets are bound and its start-up has finished. False when
    the start-up failed (what failed is already in the log, in one line)."""
    task = asyncio.create_task(server.serve())
    # uvicorn says it is up with a flag only (no event to wait on): looked at every 20 ms
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if server.started:
        announce(ready)
    await task
    return bool(server.started)


def run_server(main: Coroutine[Any, Any, bool]) -> bool:
    """`asyncio.run(main)`, False when the server did not start: uvicorn exits the process (SystemExit, through
    the event loop) when it cannot bind its port, and the log already says why, in one line."""
    try:
        return asyncio.run(main)
    except SystemExit:
        return False
