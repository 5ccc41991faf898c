"""The items of a batch input: JSONL or RefChecker's JSON array, each line or item checked on its own (a bad one
is an error naming it, the rest are read), the reading bounded by a line limit where one is given."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from debate.errors import InputError, InputTooLongError
from debate.files import decode_text, holds_long_number, json_reason, load_json
from debate.plugins import Reference
from debate.sources import read_sources
from debate.types import Evidence, Source

__all__ = ["CSV_LABELS", "BatchItem", "InputTooLongError", "Work", "read_input", "read_items", "read_keyed"]


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
    label_factual: bool | None = None
    """The response's true label, when someone knows it (true: factual): kept in its result record, where `debate
    dynamics fit` reads it (a label on part of a batch calibrates the fit on the rest)."""

    @field_validator("label_factual", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        # a JSON boolean only: "true" as text, 1 or "yes" are not labels anyone should guess at (a CSV cell's words
        # are read by the table reader, CSV_LABELS); anything else is refused, never kept as text and ignored
        if value is not None and not isinstance(value, bool):
            shown = f"the text {value!r}" if isinstance(value, str) else repr(value)
            raise ValueError(f"must be true or false (a JSON boolean; in a CSV or TSV cell, the word), got {shown}")
        return value

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

    def content_sha256(self) -> str:
        """The digest of what decides this item's verdict (every field but the label): a record keeps it, so a
        re-run sees an edited line (a corrected response, another reference) and verifies it again."""
        decided = self.model_dump(mode="json", exclude={"label_factual"})
        return hashlib.sha256(json.dumps(decided, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def claim_texts(self) -> list[str] | None:
        if self.claims is None:
            return None
        from debate.claims import triplet_sentence  # the extraction stage: not needed to read a file

        return [c if isinstance(c, str) else triplet_sentence(*c) for c in self.claims]

    def evidence(self) -> Reference | Sequence[Source] | None:
        reference = self.reference
        if isinstance(reference, list) and all(isinstance(r, str) for r in reference):
            passages = [r for r in reference if isinstance(r, str) and r.strip()]
            return [Evidence(text=p.strip(), source=f"passage {i}", kind="given") for i, p in enumerate(passages, 1)]
        if isinstance(reference, list):
            return read_sources([r for r in reference if isinstance(r, dict)])
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


CSV_LABELS = {"true": True, "false": False}
"""The words a CSV/TSV `label_factual` cell may hold (any case, blanks around them ignored); an empty cell is no
label, any other word is refused naming its line."""

_WIDE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}


def _is_array(path: Path, head: bytes) -> bool:
    """Whether the input is one JSON array (its first character, past a BOM and blanks, is `[`)."""
    if path.suffix.lower() in _TABLE_SUFFIXES:
        return False
    if head.startswith(_WIDE_BOMS):
        return decode_text(head[:4], str(path)).lstrip("\ufeff").lstrip().startswith("[")
    return head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(b"[")


def read_input(path: Path, max_lines: int | None = None) -> Iterator[Work]:
    """JSONL read as bytes (a line that is not UTF-8 is one error naming its line; a BOM and CRLF are fine; a
    UTF-16 or UTF-32 file, known by its BOM, is decoded whole), a RefChecker JSON array (detected by its first
    character; an item's `line` is its 1-based index), or CSV/TSV by the file's suffix (a header row names the
    fields; an item's `line` is its row's line). With `max_lines`, reading stops with InputTooLongError at the
    first line past it, blank or not."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    if path.suffix.lower() in _TABLE_SUFFIXES:
        yield from _read_table(path, _TABLE_SUFFIXES[path.suffix.lower()], max_lines)
        return
    wide = head.startswith(_WIDE_BOMS)
    if _is_array(path, head):
        yield from _read_array(path)
        return
    lines = (
        (line.encode("utf-8", "surrogatepass") for line in decode_text(path.read_bytes(), str(path)).splitlines(True))
        if wide
        else None
    )
    with path.open("rb") as fh:
        for number, raw_line in enumerate(lines if lines is not None else fh, start=1):
            if max_lines is not None and number > max_lines:
                raise InputTooLongError(f"{path}: more than {max_lines} lines (blank lines count)")
            yield from _jsonl_line(path, number, raw_line)


def _jsonl_line(path: Path, number: int, raw_line: bytes) -> Iterator[Work]:
    sha = hashlib.sha256(raw_line.rstrip(b"\r\n")).hexdigest()
    if number == 1 and raw_line.startswith(b"\xef\xbb\xbf"):
        raw_line = raw_line[3:]
    try:
        text = raw_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw_line[exc.start : exc.start + 1].hex()
        yield Work(number, sha, None, None, f"line {number}: not valid UTF-8 (byte 0x{bad} at column {exc.start + 1})")
        return
    if not text.strip():
        return
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if number == 1 and text.strip() == "{":
            _refuse_one_document(path)
        yield Work(number, sha, None, None, f"line {number}: not valid JSON ({json_reason(exc)})")
        return
    except RecursionError:
        yield Work(number, sha, None, None, f"line {number}: nested too deeply to read")
        return
    except ValueError:
        digits = sys.get_int_max_str_digits()
        yield Work(number, sha, None, None, f"line {number}: a number has more than {digits} digits")
        return
    yield _validate(number, sha, raw, "line")


def _refuse_one_document(path: Path) -> None:
    """A pretty-printed JSON object is one document, not JSON Lines: say so once instead of an error a line."""
    try:
        load_json(decode_text(path.read_bytes(), str(path)), str(path))
    except InputError:
        return
    raise InputError(
        f"{path} is one JSON document spread over several lines; a batch is JSON Lines (one item per line) or a "
        "JSON array of items"
    )


def _read_table(path: Path, delimiter: str, max_lines: int | None) -> Iterator[Work]:
    text = decode_text(path.read_bytes(), str(path))
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(rows, None)
    except csv.Error as exc:
        raise InputError(f"{path} line 1: not a readable header row ({exc})") from exc
    if header is None or not any(h.strip() for h in header):
        raise InputError(f"{path}: no header row; the first row names the fields (id, question, response, reference)")
    names = [h.strip() for h in header]
    while True:
        start = rows.line_num + 1
        if max_lines is not None and start > max_lines:
            raise InputTooLongError(f"{path}: more than {max_lines} lines (blank lines count)")
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"{path} line {rows.line_num}: not valid CSV ({exc})") from exc
        if not any(cell.strip() for cell in row):
            continue
        sha = hashlib.sha256(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
        if len(row) > len(names):
            yield Work(start, sha, None, None, f"line {start}: {len(row)} cells, but the header names {len(names)}")
            continue
        raw: dict[str, Any] = {name: cell for name, cell in zip(names, row, strict=False) if name and cell != ""}
        if "label_factual" in raw:
            raw["label_factual"] = CSV_LABELS.get(raw["label_factual"].strip().lower(), raw["label_factual"])
        if "claims" in raw:
            try:
                raw["claims"] = load_json(raw["claims"], f"line {start}: field 'claims'")
            except InputError as exc:
                yield Work(start, sha, None, None, f"{exc} (a JSON array in its cell)")
                continue
        yield _validate(start, sha, raw, "line")


def read_items(path: Path, *, max_lines: int | None = None) -> Iterator[tuple[int, BatchItem | None, str | None]]:
    """The items of a JSONL or RefChecker JSON-array file: (line or item number, item, None), or (number, None, the
    error naming that line) for one that cannot be read. Raises InputError for a JSON array unreadable as a whole,
    and InputTooLongError at the first JSONL line past `max_lines` (blank lines count)."""
    for work in read_input(path, max_lines):
        yield work.line, work.item, work.error


def read_items_with_fields(
    path: Path, *, max_lines: int | None = None
) -> Iterator[tuple[int, BatchItem | None, dict[str, Any] | None, str | None]]:
    """As `read_items`, with each readable item's fields as the file gave them (the ones BatchItem does not name
    included: a reader that takes more, such as the desk's per-line `overrides`, reads them here)."""
    for work in read_input(path, max_lines):
        yield work.line, work.item, work.raw if work.item is not None else None, work.error


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
        data = load_json(decode_text(path.read_bytes(), str(path)), str(path), keep_long_numbers=True)
    except InputError as exc:
        # a JSONL file whose first line is a list is read this way too: say why, or "Extra data" on line 2 puzzles
        raise InputError(f"{exc.message} (read as one JSON array, since the file starts with '[')") from exc
    if not isinstance(data, list):
        raise InputError(f"{path}: a JSON input must be an array of items (RefChecker's format)")
    for index, raw in enumerate(data, start=1):
        if holds_long_number(raw):
            sha = hashlib.sha256(repr(raw).encode("utf-8", "surrogatepass")).hexdigest()
            digits = sys.get_int_max_str_digits()
            yield Work(index, sha, None, None, f"item {index}: a number has more than {digits} digits")
            continue
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


def read_keyed(path: Path) -> Iterator[Work]:
    """`read_input`'s lines as the output keys them: a repeated id's later lines are errors keyed by their line."""
    first_line: dict[str, int] = {}
    with path.open("rb") as fh:
        where = "item" if _is_array(path, fh.read(4096)) else "line"  # an array's elements are items
    for work in read_input(path):
        if work.item is not None:
            first = first_line.setdefault(work.item.id, work.line)
            if first != work.line:
                message = f"{where} {work.line}: duplicate id {work.item.id!r} (first on {where} {first})"
                work = Work(work.line, work.sha, work.raw, None, message)
        yield work
