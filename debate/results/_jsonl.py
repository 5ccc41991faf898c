"""The one JSONL results log, shared by `debate verify --input` and the experiments: streamed in input order,
resumable after any interruption (kill -9 included), one writer at a time.

Records are `debate.results._records`' typed records, and whether one is final is their one rule (`is_final`): a final
record is skipped on the next run, every other is redone (unless `retry_failed` is off). The last record of a
key wins; `compact` rewrites the file atomically with exactly one record per input key, in input order.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar

from pydantic import ValidationError

from debate.concurrency import ordered_map
from debate.errors import UsageError
from debate.results._finished import Finished, fields_sha256, finals, short
from debate.results._records import (
    ErrorRecord,
    PredictionRecord,
    Record,
    ResultRecord,
    outcome_of,
    parse_record,
    record_content,
)
from debate.results._settings import same_setting, setting_differences, setting_of
from debate.workers import Job, process_map

__all__ = [
    "OutputLock",
    "ResultsLog",
    "ResumeState",
    "compact",
    "run_ordered",
    "scan_results",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ResumeState:
    """What an output already holds: final keys (with the hash of the input line they answered) and the rest."""

    entries: dict[str, Finished] = field(default_factory=dict)
    """Key -> where its final record is and what it answered."""
    setting_list: list[str] = field(default_factory=list)
    """The settings of the finished reports (JSON), indexed by Finished.setting."""
    redo: set[str] = field(default_factory=set)
    """Keys whose last record is not final: done again."""
    settings: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    """The settings the finished reports were made with (debate.results._settings): JSON -> (records, settings)."""

    @property
    def final(self) -> Mapping[str, str | None]:
        """Key -> sha256 of the input line the record answered (None when not recorded)."""
        return finals(self.entries)

    def other_settings(self, current: dict[str, Any]) -> tuple[int, list[str]]:
        """How many finished reports were made with settings other than `current`, and the first differences."""
        count, found = 0, list[str]()
        for records, setting in self.settings.values():
            if not same_setting(setting, current):
                count += records
                found = found or setting_differences(setting, current)
        return count, found

    def other_indices(self, current: dict[str, Any]) -> frozenset[int]:
        """The indices (Finished.setting) of the settings other than `current`: their records are redone (--redo)."""
        return frozenset(
            i for i, shown in enumerate(self.setting_list) if not same_setting(self.settings[shown][1], current)
        )

    def done(self, key: str, line_sha: str | None = None) -> bool:
        if key not in self.final:
            return False
        recorded = self.final[key]
        # An input error is final only for the line as it was: a fixed line is redone.
        return not (key.startswith("line:") and recorded is not None and recorded != line_sha)


def scan_results(output: Path, *, retry_failed: bool = True) -> ResumeState:
    """Read an output one line at a time (memory stays flat); drop a torn last line left by an interruption."""
    state = ResumeState()
    if not output.exists():
        return state
    good_end = 0
    with output.open("rb") as fh:
        for number, raw_line in enumerate(fh, start=1):
            if not raw_line.endswith(b"\n"):
                break  # a record torn by an interruption: dropped below and redone
            offset = good_end
            good_end += len(raw_line)
            if not raw_line.strip():
                continue
            try:
                record = json.loads(raw_line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{output} line {number} is not JSON ({exc.msg}); it is not an output of this tool"
                ) from exc
            try:
                typed = parse_record(record)
            except ValidationError:
                log.warning("%s line %d: not a results record; its item is done again", output, number)
                continue
            key = typed.key
            if key is None:
                continue
            if typed.is_final or not retry_failed:
                index = -1
                if isinstance(typed, ResultRecord):
                    setting = setting_of(typed.result.task, typed.result.meta)
                    shown = json.dumps(setting, sort_keys=True)
                    state.settings[shown] = (state.settings.get(shown, (0, setting))[0] + 1, setting)
                    if shown not in state.setting_list:
                        state.setting_list.append(shown)
                    index = state.setting_list.index(shown)
                content = record_content(typed)
                line_sha = typed.line_sha256 if isinstance(typed, ErrorRecord) else None
                state.entries[key] = Finished(
                    offset,
                    None if content is None else short(content),
                    short(_fields_of(typed)),
                    index,
                    line_sha,
                    outcome_of(typed),
                )
                state.redo.discard(key)
            else:
                state.entries.pop(key, None)
                state.redo.add(key)
    size = output.stat().st_size
    if good_end < size:
        log.warning(
            "%s: dropping an incomplete last record (%d bytes) left by an interrupted run", output, size - good_end
        )
        with output.open("r+b") as fh:
            fh.truncate(good_end)
    return state


def _fields_of(record: Record) -> str:
    if isinstance(record, PredictionRecord):
        return fields_sha256(record.source_line, {"label_factual": record.label_factual})
    return fields_sha256(record.line, dict(record.model_extra or {}))


def _key(raw_line: bytes) -> str | None:
    try:
        return parse_record(json.loads(raw_line)).key
    except ValidationError:
        return None  # not a record: compact drops it


def compact(
    output: Path,
    keys_in_order: Iterable[str],
    *,
    retire_to: Callable[[list[tuple[bytes, str]]], None] | None = None,
    why: Callable[[str], str] | None = None,
) -> tuple[int, int]:
    """Rewrite `output` atomically: the last record of each key, in the given order. Records of keys not given
    (superseded records, ids no longer in the input) are dropped; given `retire_to`, each dropped final record is
    first handed to it with `why(key)` (debate.results._resume keeps them in the log's history). Returns (kept,
    dropped)."""
    if not output.exists():
        return 0, 0
    latest: dict[str, tuple[int, int]] = {}
    total = 0
    with output.open("rb") as fh:
        offset = 0
        for raw_line in fh:
            if raw_line.strip():
                total += 1
                key = _key(raw_line)
                if key is not None:
                    latest[key] = (offset, len(raw_line))
            offset += len(raw_line)
    tmp = output.with_name(output.name + ".compact.tmp")
    kept_at: set[int] = set()
    with output.open("rb") as source, tmp.open("wb") as target:
        for key in keys_in_order:
            where = latest.pop(key, None)
            if where is None:
                continue
            source.seek(where[0])
            target.write(source.read(where[1]))
            kept_at.add(where[0])
        target.flush()
        os.fsync(target.fileno())
    if retire_to is not None:
        retire_to(list(_dropped_finals(output, kept_at, why or (lambda key: "superseded"))))
    os.replace(tmp, output)
    return len(kept_at), total - len(kept_at)


def _dropped_finals(output: Path, kept_at: set[int], why: Callable[[str], str]) -> Iterable[tuple[bytes, str]]:
    """Each final record of `output` not at a kept offset, with why it leaves (unfinished ones are not work)."""
    with output.open("rb") as fh:
        offset = 0
        for raw_line in fh:
            at, offset = offset, offset + len(raw_line)
            if at in kept_at or not raw_line.strip():
                continue
            try:
                record = parse_record(json.loads(raw_line))
            except (ValidationError, json.JSONDecodeError):
                continue  # not a record: nothing to keep
            if record.is_final and record.key is not None:
                yield raw_line, why(record.key)


class ResultsLog:
    """Appends one JSON record per line. Each record is flushed to the OS at once (a killed process loses nothing
    written); fsync, for power loss, is grouped (every `sync_every` records or `sync_interval_s`, and at close).
    A record torn by a crash is dropped at resume."""

    def __init__(self, path: Path, *, sync_every: int = 64, sync_interval_s: float = 0.1) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._sync_every = sync_every
        self._sync_interval_s = sync_interval_s
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self.syncs = 0

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fh is not None:
            if self._unsynced:
                self._sync()
            self._fh.close()
            self._fh = None

    def _sync(self) -> None:
        assert self._fh is not None
        os.fsync(self._fh.fileno())
        self.syncs += 1
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def write(self, record: Record) -> None:
        self.write_line(record.to_json())

    def write_line(self, line: str) -> None:
        """One record already serialized (debate.results._resume's updated records)."""
        assert self._fh is not None, "use ResultsLog as a context manager"
        self._fh.write(line + "\n")
        self._fh.flush()
        self._unsynced += 1
        if self._unsynced >= self._sync_every or time.monotonic() - self._last_sync >= self._sync_interval_s:
            self._sync()


class OutputLock:
    """One writer per output: an exclusive advisory lock on `<output>.lock`, which holds the writer's PID.

    The OS drops the lock when its process dies (kill -9 included), so a stale lock is taken over safely. The file
    is removed on a clean exit, while still locked; a process that locked a file which was removed meanwhile sees
    that its path now names another file (or none) and locks again, so two writers never hold two different files."""

    def __init__(self, output: Path) -> None:
        self.path = output.with_name(output.name + ".lock")
        self._fd: int | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(fd)
            except OSError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                output = self.path.name.removesuffix(".lock")
                raise UsageError(
                    f"{output} is being written by another process (PID {holder}); wait for it to finish or choose "
                    "another --output"
                ) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # its holder removed it on exit after we opened it: lock the current file
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


async def run_ordered(
    items: Iterable[T],
    fn: Callable[[T], Awaitable[Record]],
    *,
    output: Path,
    limit: int,
    on_record: Callable[[Record], None] | None = None,
    job: Job[T, Record] | None = None,
) -> AsyncIterator[Record]:
    """Run `fn` over `items` (at most `limit` at once) and append each record to `output` in input order.
    Given a `job` (the same work as `fn`, picklable), it runs on `job.workers` processes instead; this process
    stays the one writer. `on_record` may raise to stop the run: the records written so far are kept."""
    source = process_map(items, job, limit=limit) if job is not None else ordered_map(items, fn, limit=limit)
    with ResultsLog(output) as results:
        async for record in source:
            results.write(record)
            if on_record is not None:
                on_record(record)
            yield record
