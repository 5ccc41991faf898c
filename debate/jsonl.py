"""The one JSONL results log, shared by `debate verify --input` and the experiments: streamed in input order,
resumable after any interruption (kill -9 included)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar

from debate.concurrency import ordered_map
from debate.errors import UsageError

__all__ = ["ResultsLog", "completed_keys", "run_ordered"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def completed_keys(output: Path) -> set[str]:
    """Keys already in the output: ids of results, `line:N` of error records. Drops a torn last line.

    Reads one line at a time, so resuming a long run does not load its results into memory."""
    if not output.exists():
        return set()
    keys: set[str] = set()
    good_end = 0
    with output.open("rb") as fh:
        for number, raw_line in enumerate(fh, start=1):
            if not raw_line.endswith(b"\n"):
                break  # a record torn by an interruption: dropped below and redone
            good_end += len(raw_line)
            if not raw_line.strip():
                continue
            try:
                record = json.loads(raw_line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{output} line {number} is not JSON ({exc.msg}); it is not an output of this tool"
                ) from exc
            if isinstance(record.get("error"), dict) and record.get("line") is not None:
                keys.add(f"line:{record.get('line')}")
            elif record.get("id") is not None:
                keys.add(str(record["id"]))
    size = output.stat().st_size
    if good_end < size:
        log.warning(
            "%s: dropping an incomplete last record (%d bytes) left by an interrupted run", output, size - good_end
        )
        with output.open("r+b") as fh:
            fh.truncate(good_end)
    return keys


class ResultsLog:
    """Appends one JSON record per line; each record is flushed and fsynced, so it is either wholly on disk or
    (torn) dropped at resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def write(self, record: dict[str, Any]) -> None:
        assert self._fh is not None, "use ResultsLog as a context manager"
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())


async def run_ordered(
    items: Iterable[T],
    fn: Callable[[T], Awaitable[dict[str, Any]]],
    *,
    output: Path,
    limit: int,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Run `fn` over `items` (at most `limit` at once) and append each record to `output` in input order."""
    with ResultsLog(output) as results:
        async for record in ordered_map(items, fn, limit=limit):
            results.write(record)
            if on_record is not None:
                on_record(record)
            yield record
