"""The items of a batch input: JSONL or RefChecker's JSON array, each line or item checked on its own (a bad one
is an error naming it, the rest are read), the reading bounded by a line limit where one is given."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from debate.claims._extract import triplet_sentence
from debate.errors import InputError
from debate.plugins import Reference
from debate.tasks._rag import sources_from
from debate.types import Evidence, Source

__all__ = ["BatchItem", "InputTooLongError", "Work", "read_input", "read_items"]


class BatchItem(BaseModel):
    """One input item, with RefChecker's field names. Other fields are carried through to the output."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    """Unique within the file; the resume key (a RefChecker JSON array may leave it out: the item's index is used)."""
    question: str | None = None
    """The question the response answers."""
    response: str = Field(min_length=1)
    """The text to check."""
    reference: str | dict[str, str] | list[str] | list[dict[str, Any]] | None = None
    """Evidence: knowledge or document text, or a list of passages (RefChecker's noisy context); for task rag the
    sources ({id: text} or [{id, text, parent_id}])."""
    claims: list[str] | list[list[str]] | None = None
    """Claims to verify instead of extracting them: sentences, or RefChecker (subject, predicate, object) triplets."""

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("response")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("claims")
    @classmethod
    def _triplets(cls, value: list[str] | list[list[str]] | None) -> list[str] | list[list[str]] | None:
        for index, claim in enumerate(value or []):
            if isinstance(claim, list) and len(claim) != 3:
                raise ValueError(f"claim {index} has {len(claim)} parts; a triplet is [subject, predicate, object]")
        return value

    def claim_texts(self) -> list[str] | None:
        if self.claims is None:
            return None
        return [c if isinstance(c, str) else triplet_sentence(*c) for c in self.claims]

    def evidence(self) -> Reference | Sequence[Source] | None:
        reference = self.reference
        if isinstance(reference, list) and all(isinstance(r, str) for r in reference):
            passages = [r for r in reference if isinstance(r, str) and r.strip()]
            return [Evidence(text=p.strip(), source=f"passage {i}", kind="given") for i, p in enumerate(passages, 1)]
        if isinstance(reference, list):
            return sources_from([r for r in reference if isinstance(r, dict)])
        return reference


@dataclass
class Work:
    line: int
    sha: str
    raw: dict[str, Any] | None
    item: BatchItem | None
    error: str | None

    @property
    def key(self) -> str:
        return self.item.id if self.item is not None else f"line:{self.line}"


def _describe_validation(line: int, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(line)"
        parts.append(f"field {where!r}: {err['msg']}")
    return f"line {line}: " + "; ".join(parts)


class InputTooLongError(InputError):
    """The input has more lines than the reader was allowed (blank lines count: each one is read)."""


def read_input(path: Path, max_lines: int | None = None) -> Iterator[Work]:
    """JSONL read as bytes (a line that is not UTF-8 is one error naming its line; a BOM and CRLF are fine), or a
    RefChecker JSON array (detected by its first character; an item's `line` is its 1-based index). With
    `max_lines`, reading stops with InputTooLongError at the first line past it, blank or not."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
    if head.startswith(b"["):
        yield from _read_array(path)
        return
    with path.open("rb") as fh:
        for number, raw_line in enumerate(fh, start=1):
            if max_lines is not None and number > max_lines:
                raise InputTooLongError(f"{path}: more than {max_lines} lines (blank lines count)")
            sha = hashlib.sha256(raw_line.rstrip(b"\r\n")).hexdigest()
            if number == 1 and raw_line.startswith(b"\xef\xbb\xbf"):
                raw_line = raw_line[3:]
            try:
                text = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw_line[exc.start : exc.start + 1].hex()
                message = f"line {number}: not valid UTF-8 (byte 0x{bad} at column {exc.start + 1})"
                yield Work(number, sha, None, None, message)
                continue
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                yield Work(number, sha, None, None, f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            except RecursionError:
                yield Work(number, sha, None, None, f"line {number}: nested too deeply to read")
                continue
            yield _validate(number, sha, raw, "line")


def read_items(path: Path, *, max_lines: int | None = None) -> Iterator[tuple[int, BatchItem | None, str | None]]:
    """The items of a JSONL or RefChecker JSON-array file: (line or item number, item, None), or (number, None, the
    error naming that line) for one that cannot be read. Raises InputError for a JSON array unreadable as a whole,
    and InputTooLongError at the first JSONL line past `max_lines` (blank lines count)."""
    for work in read_input(path, max_lines):
        yield work.line, work.item, work.error


def _validate(number: int, sha: str, raw: Any, unit: str) -> Work:
    if not isinstance(raw, dict):
        return Work(number, sha, None, None, f"{unit} {number}: expected a JSON object, got {type(raw).__name__}")
    try:
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # JSON may escape half of a UTF-16 pair ("\ud800"); no text that holds one can be sent or stored.
        return Work(number, sha, None, None, f"{unit} {number}: a string holds a lone surrogate (not valid Unicode)")
    except RecursionError:
        return Work(number, sha, None, None, f"{unit} {number}: nested too deeply to read")
    try:
        return Work(number, sha, raw, BatchItem.model_validate(raw), None)
    except ValidationError as exc:
        return Work(number, sha, raw, None, _describe_validation(number, exc).replace("line", unit, 1))
    except RecursionError:
        return Work(number, sha, raw, None, f"{unit} {number}: nested too deeply to read")


def _read_array(path: Path) -> Iterator[Work]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 (byte {exc.start + 1})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InputError(f"{path}: nested too deeply to read") from exc
    if not isinstance(data, list):
        raise InputError(f"{path}: a JSON input must be an array of items (RefChecker's format)")
    for index, raw in enumerate(data, start=1):
        try:
            # surrogatepass: the hash of every valid item is what it always was; a lone surrogate is named below
            text = json.dumps(raw, sort_keys=True, ensure_ascii=False)
            sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        except RecursionError:
            sha = hashlib.sha256(str(index).encode()).hexdigest()
        if isinstance(raw, dict) and raw.get("id") is None:
            # RefChecker's items have no id: the 0-based index is the key (`id_from_index` marks it as ours).
            raw = {**raw, "id": str(index - 1), "id_from_index": True}
        yield _validate(index, sha, raw, "item")
