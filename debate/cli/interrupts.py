"""What a `debate` command stopped by Ctrl-C or SIGTERM says: one line, with what each command registered as kept
(`on_interrupt`), printed to standard error or written by a server's log (`write_interrupted_with`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["interrupted_line", "kept_records", "on_interrupt", "say_interrupted", "write_interrupted_with"]

_INTERRUPT_NOTES: list[Callable[[], str]] = []


def on_interrupt(note: Callable[[], str]) -> None:
    """Register what an interrupted command keeps (e.g. "3 finished records are kept in out.jsonl; run the same
    command to resume"), said on the one line a Ctrl-C or SIGTERM prints; without one, the line says only that the
    command stopped, never that something was kept."""
    _INTERRUPT_NOTES.append(note)


def kept_records(path: Path) -> Callable[[], str]:
    """An interrupt note counting the finished records in a results log (complete lines only)."""

    def note() -> str:
        if not path.exists():
            return "no record was finished"
        with path.open("rb") as fh:
            count = sum(1 for line in fh if line.endswith(b"\n") and line.strip())
        if count == 0:
            return "no record was finished"
        return f"{count} finished record(s) kept in {path}; run the same command to resume"

    return note


_LINE_WRITER: list[Callable[[str], None]] = []


def write_interrupted_with(writer: Callable[[str], None]) -> None:
    """Say the interrupted line with `writer` instead of printing it (a server writes it as a line of its log,
    timestamped and in its format)."""
    _LINE_WRITER[:] = [writer]


def say_interrupted(how: str) -> None:
    """Write the one line an interrupted command prints, to standard error or through the registered writer."""
    line = interrupted_line(how)
    if _LINE_WRITER:
        _LINE_WRITER[0](line)
    else:
        print(line, file=sys.stderr)


def interrupted_line(how: str) -> str:
    """The one line an interrupted command prints."""
    notes = []
    for note in _INTERRUPT_NOTES:
        try:
            notes.append(note())
        except OSError as exc:  # the note reads a file the interruption may have left half-written
            notes.append(f"what was kept could not be read ({exc.strerror})")
    return "; ".join([f"debate: {how}", *notes])
