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

from debate.errors import UsageError
from debate.results._finished import fields_sha256
from debate.results._items import Work, read_keyed
from debate.results._jsonl import ResultsLog, ResumeState, compact, scan_results
from debate.results._records import parse_record
from debate.results._settings import setting_differences, shown_differences, startless_setting

__all__ = [
    "Change",
    "Retired",
    "classify",
    "compact_keeping",
    "count_pending",
    "history_entries",
    "history_path",
    "record_at",
    "refuse_other_finished",
    "retire",
    "updated_record",
]

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
    history written, the log not yet rewritten) is not kept twice. A torn last entry (a kill during an append) is
    cut off first, so no record is ever glued to a fragment. Synced before the caller rewrites the log."""
    pending = list(lines)
    if not pending:
        return
    index = _HistoryIndex(history)
    seen = index.digests()
    at = datetime.now(UTC).isoformat(timespec="seconds")
    history.parent.mkdir(parents=True, exist_ok=True)
    added: list[tuple[str, int]] = []
    _cut_torn_tail(history)
    with history.open("ab") as fh:
        for raw, why in pending:
            digest = hashlib.sha256(raw.rstrip(b"\n")).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            record: Any = json.loads(raw)
            entry = {"superseded": {"why": why, "at": at, "sha256": digest}, "record": record}
            fh.write(json.dumps(entry).encode("utf-8", "surrogatepass") + b"\n")
            added.append((digest, fh.tell()))
            retired.count(why)
        fh.flush()
        os.fsync(fh.fileno())
    index.append(added)


def _cut_torn_tail(path: Path) -> None:
    """Cut a last line with no newline (an append a kill tore) off `path`, so that what is appended next starts on
    a line of its own. Nothing is lost: the log is rewritten only after its history is synced, so a record torn
    there is still in the log and is retired again."""
    if not path.is_file():
        return
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            block = fh.read(end - start)
            if end == size and block.endswith(b"\n"):
                return
            newline = block.rfind(b"\n")
            if newline >= 0:
                fh.truncate(start + newline + 1)
                return
            end = start
        fh.truncate(0)


def history_entries(history: Path) -> tuple[list[dict[str, Any]], int]:
    """The entries of a log's history in file order, and how many of its lines are not entries (a torn last line a
    kill left, skipped: the record it held is still in the log, and the next retirement cuts it off)."""
    entries: list[dict[str, Any]] = []
    torn = 0
    if not history.is_file():
        return entries, torn
    with history.open("rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            entry = _entry(raw) if raw.endswith(b"\n") else None
            if entry is None:
                torn += 1
            else:
                entries.append(entry)
    return entries, torn


def _entry(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    ok = isinstance(entry, dict) and isinstance(entry.get("superseded"), dict) and "record" in entry
    return entry if ok and isinstance(entry["superseded"].get("sha256"), str) else None


class _HistoryIndex:
    """The digests of a history's records, kept beside it (`<history>.index`: `<sha256> <end offset>` a line), so a
    re-run reads digests, not every record. The history decides: entries past the index's last offset (a kill
    between the two appends) are read from the history and added; an index that does not fit the history (shorter
    history, unreadable index) is rebuilt from it."""

    def __init__(self, history: Path) -> None:
        self.history, self.path = history, history.with_name(history.name + ".index")

    def digests(self) -> set[str]:
        if not self.history.is_file():
            self.path.unlink(missing_ok=True)  # an index left beside a history removed by hand describes nothing
            return set()
        size = self.history.stat().st_size
        read = self._read(size)
        if read is None:
            every = self._scan(0)
            self.append(every, rebuild=True)
            return {digest for digest, _ in every}
        seen, end = read
        if end < size:
            tail = self._scan(end)
            seen |= {digest for digest, _ in tail}
            self.append(tail)
        return seen

    def _read(self, size: int) -> tuple[set[str], int] | None:
        """The index's digests and the history offset it reaches; None when it does not describe the history
        (missing, torn by a kill while appended to, or past the history's end)."""
        seen: set[str] = set()
        end = 0
        try:
            with self.path.open("rb") as fh:
                for raw in fh:
                    parts = raw.split()
                    if not raw.endswith(b"\n") or len(parts) != 2 or not parts[1].isdigit():
                        return None
                    seen.add(parts[0].decode("ascii"))
                    end = int(parts[1])
        except (OSError, UnicodeDecodeError):
            return None
        return (seen, end) if end <= size else None

    def _scan(self, start: int) -> list[tuple[str, int]]:
        found = []
        with self.history.open("rb") as fh:
            fh.seek(start)
            offset = start
            for raw in fh:
                offset += len(raw)
                entry = _entry(raw) if raw.endswith(b"\n") else None
                if entry is not None:
                    found.append((entry["superseded"]["sha256"], offset))
        return found

    def append(self, added: list[tuple[str, int]], *, rebuild: bool = False) -> None:
        if not added and not rebuild:
            return
        text = "".join(f"{digest} {end}\n" for digest, end in added).encode("ascii")
        if rebuild:
            self.path.write_bytes(text)
            return
        with self.path.open("ab") as fh:
            fh.write(text)


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


def refuse_other_finished(output: Path, task: str, config: dict[str, Any]) -> None:
    """A batch with nothing left to run: refuse it (UsageError) when its finished records were made with other
    settings than these (judged without starting the model), as a resumed batch is refused; "already done" would
    otherwise stand for verdicts of another configuration."""
    current = startless_setting(task, config)
    for count, setting in scan_results(output).settings.values():
        found = setting_differences(setting, current)
        if found:
            raise UsageError(
                f"{output} holds {count} finished record(s) made with other settings ({shown_differences(found)}); "
                "run with the options they were made with, take the new settings with --redo, or write to another "
                "--output"
            )


def count_pending(
    input_path: Path,
    output_path: Path,
    *,
    retry_failed: bool = True,
    task: str | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[int, int]:
    """(items to verify, items whose record stands, updated or not): a batch with nothing to verify needs no
    model. Given the run's `task` and `config`, records made with other settings (judged without the model) are
    to verify (--redo)."""
    state = scan_results(output_path, retry_failed=retry_failed)
    current = None if task is None or config is None else startless_setting(task, config)
    other = frozenset(
        i
        for i, shown in enumerate(state.setting_list)
        if current is not None and setting_differences(state.settings[shown][1], current)
    )
    todo = done = 0
    for work in read_keyed(input_path):
        if classify(work, state, other) in ("done", "update"):
            done += 1
        else:
            todo += 1
    return todo, done
