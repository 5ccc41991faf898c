"""What the resume state keeps of each final record of a results log: where it is and short digests of what it
answered (debate.results._jsonl reads the log, debate.results._resume decides what a re-run does)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Finished", "fields_sha256", "finals", "short"]


def short(digest: str) -> bytes:
    # 16 bytes of a sha256 tell lines apart as surely as 64 hex characters, in a quarter of the memory per record
    return bytes.fromhex(digest[:32])


@dataclass(slots=True)
class Finished:
    """Where a final record is and what it answered, without holding the record (memory stays flat)."""

    offset: int
    """Its byte offset in the log."""
    content: bytes | None
    """The digest of the input fields that decided it (BatchItem.content_sha256 or the record's own, shortened);
    None when its fields are not an item's (an error record of an unreadable line)."""
    fields: bytes
    """The digest of its input line as carried (every field, the label included) and its line number, shortened."""
    setting: int
    """Index into ResumeState.setting_list of the settings it was made with; -1 for no report."""
    line_sha: str | None = None
    """For an input error record: the sha256 of the line as it was."""
    outcome: str = "factual"
    """Its verdict (a ReportVerdict), or `error` (no report: an input or final error) or `failed` (a report whose
    claims could not be obtained): what the batch's gate counts (debate.results._gate)."""

    def content_differs(self, content_sha256: str) -> bool:
        """Whether the input's content now (its digest) is not what this record answered (False when unknown)."""
        return self.content is not None and self.content != short(content_sha256)

    def fields_differ(self, fields: str) -> bool:
        """Whether the input line's carried fields or place (fields_sha256) changed since this record."""
        return self.fields != short(fields)


class _Finals(Mapping[str, str | None]):
    """Final keys -> the sha256 of the input line an error record answered (None for a report): a view of the
    entries, so no key is held twice."""

    def __init__(self, entries: dict[str, Finished]) -> None:
        self._entries = entries

    def __getitem__(self, key: str) -> str | None:
        return self._entries[key].line_sha

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def fields_sha256(line: int | None, raw: dict[str, Any] | None) -> str:
    """The digest of an input line's fields as a record carries them, with its line number: a label or a note
    edited, or a line moved, changes it without changing what decides the verdict."""
    text = json.dumps([line, raw or {}], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def finals(entries: dict[str, Finished]) -> Mapping[str, str | None]:
    """Final keys -> the sha256 of the line an error record answered (None for a report), as a view of `entries`."""
    return _Finals(entries)
