"""What a re-run of a batch does with each input line, from what its log already holds: a line whose content
changed is verified again, a label (or another carried field, or the line's place) changed alone is updated
without a debate, a record whose line is gone leaves the log for its history, and nothing is ever lost: every
final record a re-run supersedes is kept in `<log>.history.jsonl`."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from debate.results._finished import fields_sha256
from debate.results._items import Work
from debate.results._jsonl import ResultsLog, ResumeState, compact
from debate.results._records import parse_record

__all__ = ["Change", "Retired", "classify", "compact_keeping", "history_path", "record_at", "retire", "updated_record"]

Change = Literal["new", "redo", "done", "changed", "update", "setting"]
"""new: no record; redo: its last record is unfinished; done: answered as it is; changed: its content changed
since (verified again); update: only its label, another carried field or its place changed (rewritten, no debate);
setting: made with other settings, redone under --redo."""


def classify(work: Work, state: ResumeState, other_settings: frozenset[int] = frozenset()) -> Change:
    """What a re-run does with `work`, given the log's `state` and the indices of the settings to redo."""
    entry = state.entries.get(work.key)
    if entry is None:
        return "redo" if work.key in state.redo else "new"
    if work.item is None:
        # an unreadable line's error record answers the line as it was: a fixed or replaced line is done again
        recorded = state.final.get(work.key)
        return "done" if recorded is None or recorded == work.sha else "changed"
    if entry.content_differs(work.item.content_sha256()):
        return "changed"
    if entry.setting in other_settings:
        return "setting"
    if entry.fields_differ(fields_sha256(work.line, work.raw)):
        return "update"
    return "done"


def updated_record(output: Path, offset: int, work: Work) -> tuple[str, bool]:
    """The record at `offset` of `output` with the input fields and line of `work` (its verdict untouched, as a
    fresh run of the same content would write it), as a log line; and whether its label changed."""
    assert work.item is not None
    old = record_at(output, offset)
    record = parse_record(old)
    carried = set(record.model_extra or {})
    ours = {k: v for k, v in old.items() if k not in carried and k != "line"}
    fresh = {**(work.raw or {}), "line": work.line, **ours, "input_sha256": work.item.content_sha256()}
    relabelled = old.get("label_factual") != (work.raw or {}).get("label_factual")
    return parse_record(fresh).to_json(), relabelled


def record_at(output: Path, offset: int) -> dict[str, Any]:
    """The record (as JSON) that starts at `offset` of a results log (Finished.offset)."""
    with output.open("rb") as fh:
        fh.seek(offset)
        found: dict[str, Any] = json.loads(fh.readline())
    return found


def history_path(output: Path) -> Path:
    """Where the records a re-run supersedes are kept: `verdicts.jsonl` -> `verdicts.history.jsonl`."""
    return output.with_name(f"{output.stem}.history{output.suffix or '.jsonl'}")


@dataclass
class Retired:
    """Records moved to the history by one compaction, by why."""

    gone: int = 0
    """Their input line is no longer in the input."""
    superseded: int = 0
    """A later record of the same line replaced them (content changed, relabelled, redone, fixed)."""
    fresh: int = 0
    """Moved by --fresh."""

    def count(self, why: str) -> None:
        if why == "line gone":
            self.gone += 1
        elif why == "fresh start":
            self.fresh += 1
        else:
            self.superseded += 1


def retire(history: Path, lines: Iterable[tuple[bytes, str]], retired: Retired) -> None:
    """Append each (record line, why) to `history`, once: a record retired again after an interruption (its
    history written, the log not yet rewritten) is not kept twice. Synced before the caller rewrites the log."""
    pending = list(lines)
    if not pending:
        return
    seen = _history_digests(history)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    history.parent.mkdir(parents=True, exist_ok=True)
    with history.open("a", encoding="utf-8") as fh:
        for raw, why in pending:
            digest = hashlib.sha256(raw.rstrip(b"\n")).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            record: Any = json.loads(raw)
            fh.write(json.dumps({"superseded": {"why": why, "at": at, "sha256": digest}, "record": record}) + "\n")
            retired.count(why)
        fh.flush()
        os.fsync(fh.fileno())


def _history_digests(history: Path) -> set[str]:
    seen: set[str] = set()
    if not history.exists():
        return seen
    with history.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    seen.add(json.loads(raw)["superseded"]["sha256"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last entry: its record is retired again
    return seen


def gone_or_superseded(keys: set[str], lines: set[int]) -> Callable[[str], str]:
    """Why a dropped record of `key` leaves the log: its line is gone, or a later record replaced it (an error
    record of line N whose line now reads is replaced, not gone)."""

    def why(key: str) -> str:
        if key in keys:
            return "superseded"
        if key.startswith("line:") and key[5:].isdigit() and int(key[5:]) in lines:
            return "superseded"
        return "line gone"

    return why


def write_updates(log: ResultsLog, output: Path, state: ResumeState, works: Iterable[Work]) -> tuple[int, int]:
    """Rewrite the record of each work classified `update` (no debate); (labels updated, other updates)."""
    labels = other = 0
    for work in works:
        entry = state.entries.get(work.key)
        if entry is None or work.item is None or classify(work, state) != "update":
            continue
        line, relabelled = updated_record(output, entry.offset, work)
        log.write_line(line)
        labels += relabelled
        other += not relabelled
    return labels, other


def compact_keeping(output: Path, keys: list[str], lines: set[int] | None = None) -> tuple[int, Retired]:
    """`compact` to one record per key of `keys` (in order), the final records it leaves out kept in the log's
    history first (`lines`: the input's line numbers, so a fixed line's error record is superseded, not gone).
    Returns (records dropped from the log, what was retired)."""
    history, retired = history_path(output), Retired()
    _, dropped = compact(
        output,
        keys,
        retire_to=lambda found: retire(history, found, retired),
        why=gone_or_superseded(set(keys), lines or set()),
    )
    return dropped, retired
