"""What a batch's log says of its whole input, line by line: checked (a verdict) or not (an input error, a report
whose claims could not be obtained, an item a transient failure left unfinished, a line never started). A gate
that reads only the verdicts it has would pass a batch that checked nothing; this tally is what it reads instead."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from debate.results._jsonl import scan_results
from debate.results._records import FailOn, fails_on, parse_record
from debate.results._resume import record_at

__all__ = ["LogTally", "tally_log"]


@dataclass
class LogTally:
    """The verdicts a log holds for each input line, and the lines it holds none for."""

    lines: int = 0
    """Input lines (each a record key)."""
    verdicts: dict[str, int] = field(default_factory=dict)
    """Checked lines by verdict."""
    errors: int = 0
    """Lines whose record is an error (the input line is wrong, or a final model error): no report."""
    failed: int = 0
    """Lines whose report has a failure: its claims could not be obtained."""
    unfinished: int = 0
    """Lines whose last record a transient failure left unfinished (a re-run redoes them)."""
    missing: int = 0
    """Lines with no record at all (never started: the cost limit, an interruption)."""
    fail_on_matched: int = 0
    """Checked lines whose verdict matches --fail-on."""
    first_unchecked: str | None = None
    """Why the first line not checked was not (its record's message)."""

    @property
    def unchecked(self) -> int:
        """Lines with no verdict."""
        return self.errors + self.failed + self.unfinished + self.missing

    @property
    def checked(self) -> int:
        return self.lines - self.unchecked

    def said(self) -> str:
        """'N of M input line(s) not checked (…; first: …)', for the start of a summary line."""
        parts = [
            f"{self.errors} input or model error(s)" if self.errors else "",
            f"{self.failed} failed (claims not obtained)" if self.failed else "",
            f"{self.unfinished} unfinished (transient failure)" if self.unfinished else "",
            f"{self.missing} never started" if self.missing else "",
        ]
        first = f"; first: {self.first_unchecked}" if self.first_unchecked else ""
        return f"{self.unchecked} of {self.lines} input line(s) not checked ({', '.join(p for p in parts if p)}{first})"


def tally_log(output: Path, keys: Iterable[str], fail_on: FailOn | None = None) -> LogTally:
    """The tally of `output` (a compacted results log) for the input's record `keys`, in input order."""
    state = scan_results(output)
    tally = LogTally()
    for key in keys:
        tally.lines += 1
        entry = state.entries.get(key)
        why: str | None = None
        if entry is None:
            if key in state.redo:
                tally.unfinished += 1
                why = f"{_named(key)}: left unfinished by a transient failure"
            else:
                tally.missing += 1
                why = f"{_named(key)}: never started"
        elif entry.outcome in ("error", "failed"):
            if entry.outcome == "error":
                tally.errors += 1
            else:
                tally.failed += 1
            if tally.first_unchecked is None:
                why = parse_record(record_at(output, entry.offset)).failure_message or entry.outcome
        else:
            tally.verdicts[entry.outcome] = tally.verdicts.get(entry.outcome, 0) + 1
            tally.fail_on_matched += fails_on(entry.outcome, fail_on)
        if tally.first_unchecked is None and why is not None:
            tally.first_unchecked = why
    return tally


def _named(key: str) -> str:
    return f"line {key[5:]}" if key.startswith("line:") else f"id {key!r}"
