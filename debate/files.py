"""The files users give and the files we keep: one reader for every text, JSON and TOML file a user names (so a BOM,
UTF-16, a byte that is not UTF-8, a number past Python's digit limit or nesting past the parser's depth is one
`InputError` naming the file and the place, in every command alike), and files that hold what others on the
machine should not read (model replies, audits, reviews)."""

from __future__ import annotations

import codecs
import json
import os
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

from debate.errors import InputError

__all__ = [
    "LongNumber",
    "decode_text",
    "holds_long_number",
    "json_reason",
    "load_json",
    "load_toml",
    "private_file",
    "read_json_file",
    "read_text_file",
    "read_toml_file",
]

# Longest first: a UTF-32 LE BOM begins with the UTF-16 LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and byte column of `offset`."""
    before = data[:offset]
    return before.count(b"\n") + 1, offset - (before.rfind(b"\n") + 1) + 1


def _looks_utf16(data: bytes) -> bool:
    """UTF-16 text without its mark: valid UTF-8 to a decoder when its characters are ASCII, and then verified as
    'S\x00h\x00...'. Its NULs fill every other byte of a sample; text meant as UTF-8 holds almost none."""
    sample = data[:4096]
    halves = (sample[0::2], sample[1::2])
    return len(sample) >= 4 and any(half.count(0) >= 0.4 * len(half) for half in halves if half)


def decode_text(data: bytes, where: str) -> str:
    """`data` as text: UTF-8, or the encoding its byte-order mark names (UTF-8, UTF-16, UTF-32; the mark itself is
    dropped, so offsets count from the first character). A byte sequence that is not valid there is an InputError
    naming the line, the column and the bytes, since guessing a legacy encoding could change what is verified."""
    encoding = "utf-8"
    for bom, name in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], name
            break
    if encoding == "utf-8" and _looks_utf16(data):
        raise InputError(
            f"{where}: looks like UTF-16 without a byte-order mark (a NUL byte beside most characters); save it as "
            "UTF-8 (e.g. iconv -f utf-16le -t utf-8), or with its byte-order mark"
        )
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line, column = _line_col(data, exc.start) if encoding == "utf-8" else (None, None)
        place = f"line {line} column {column}" if line is not None else f"byte {exc.start + 1}"
        if b"\n" not in data.rstrip(b"\r\n"):  # one line (a JSONL line, an option's file): the column says it
            place = f"column {column}" if column is not None else place
        bad = data[exc.start : exc.end].hex(" ")
        hint = "save it as UTF-8 (e.g. iconv -f cp1252 -t utf-8)" if encoding == "utf-8" else "the file is damaged"
        raise InputError(f"{where}: not valid {encoding.upper()} at {place} (bytes {bad}); {hint}") from exc


def _readable(path: Path, where: str) -> None:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"{where}: cannot read {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        raise InputError(f"{where}: {path} is a directory; give a file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{where}: {path} is not a regular file")


def read_text_file(path: Path | str, where: str) -> str:
    """The text of the file a user named (see `decode_text`); a missing, unreadable or non-regular file (a
    directory, /dev/null) is an InputError naming `where` (the option or field) and the path."""
    path = Path(path)
    _readable(path, where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{where}: cannot read {path}: {exc.strerror or exc}") from exc
    return decode_text(data, f"{where} {path}")


class LongNumber:
    """An integer of more digits than Python reads (sys.get_int_max_str_digits()), kept in place of its value by
    `load_json(..., keep_long_numbers=True)`: one item of a file holding one is refused, not the whole file."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def _int_or_long(text: str) -> int | LongNumber:
    if len(text.lstrip("-")) > sys.get_int_max_str_digits():
        return LongNumber(len(text.lstrip("-")))
    return int(text)


def holds_long_number(value: Any, depth: int = 0) -> bool:
    """Whether `value` (parsed with keep_long_numbers) holds a LongNumber anywhere."""
    if isinstance(value, LongNumber):
        return True
    if depth > 200:
        return False
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(holds_long_number(child, depth + 1) for child in children)


def json_reason(exc: json.JSONDecodeError) -> str:
    """The decoder's reason with its column: "Expecting value at column 3"; its "... starting at" messages end
    with the column, not "at at column"."""
    joint = " " if exc.msg.endswith(" at") else " at "
    return f"{exc.msg}{joint}column {exc.colno}"


def load_json(text: str, where: str, *, keep_long_numbers: bool = False) -> Any:
    """Parse JSON, every failure an InputError naming `where` and the line and column. With `keep_long_numbers`,
    an integer too long to read is a LongNumber in the result instead of an error for the whole text."""
    try:
        return json.loads(text, parse_int=_int_or_long) if keep_long_numbers else json.loads(text)
    except json.JSONDecodeError as exc:
        if "\n" not in text.rstrip("\r\n"):
            raise InputError(f"{where}: not valid JSON ({json_reason(exc)})") from exc
        raise InputError(f"{where} line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: nested too deeply to read") from exc
    except ValueError as exc:
        # Python refuses integers of more digits than sys.get_int_max_str_digits() (a guard against slow parsing).
        raise InputError(
            f"{where}: a number has more than {sys.get_int_max_str_digits()} digits, more than can be read"
        ) from exc


def read_json_file(path: Path | str, where: str) -> Any:
    """A JSON file a user named (`read_text_file`, then `load_json`)."""
    return load_json(read_text_file(path, where), f"{where} {path}")


def load_toml(text: str, where: str) -> dict[str, Any]:
    """Parse TOML, every failure an InputError naming `where` (tomllib's message carries line and column)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: nested too deeply to read") from exc
    except ValueError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from exc


def read_toml_file(path: Path | str, where: str) -> dict[str, Any]:
    """A TOML file a user named (`read_text_file`, then `load_toml`)."""
    return load_toml(read_text_file(path, where), f"{where} {path}")


def private_file(path: Path) -> Path:
    """Create `path` (and its folder) readable and writable by its owner only, or make an existing one so, before
    a database opens it: SQLite gives its -wal and -shm files the same mode as the database file. A path that
    cannot be such a file (a folder on the way is a file, the path is a folder) is an InputError saying which."""
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(f"{path}: cannot create it, {ancestor} is a file, not a directory")
            break
    if path.is_dir():
        raise InputError(f"{path} is a directory; a file is needed there")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        os.chmod(path, 0o600)
    except OSError as exc:
        raise InputError(f"{path}: cannot create it ({exc.strerror or exc})") from exc
    return path
