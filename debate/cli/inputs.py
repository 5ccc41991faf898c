"""What the command line reads: text options (as text, `@FILE` or `-`), the files options name (JSON, secrets),
and the batch input and output paths, each refused in one line that names the option when it cannot be used."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
from pathlib import Path
from typing import Any

from debate.errors import InputError, UsageError
from debate.files import decode_text, read_json_file, read_text_file
from debate.plugins import TaskInput

__all__ = ["check_input", "check_output", "read_json", "read_text_arg", "secret_from_file"]

log = logging.getLogger("debate.cli")


def secret_from_file(path: Path, flag: str) -> str:
    """The first line of a secret file (a key, a database URL), for options that keep secrets out of `ps`."""
    try:
        lines = read_text_file(path, flag).splitlines()
    except InputError as exc:
        raise UsageError(str(exc)) from exc
    if not lines or not lines[0].strip():
        raise UsageError(f"{flag}: {path} is empty")
    return lines[0].strip()


def read_text_arg(value: str | None, flag: str) -> tuple[str | None, str | None]:
    """A text option's value and where it came from. A value is text, whatever it looks like: only `@FILE` reads a
    file and `-` reads standard input (`@@...` is text that starts with one @). A value that happens to name an
    existing file is still text; a hint on stderr says how to read the file instead."""
    if value is None:
        return None, None
    if value == "-":
        try:
            return decode_text(sys.stdin.buffer.read(), f"{flag} -"), "stdin"
        except InputError as exc:
            raise UsageError(str(exc)) from exc
    if value.startswith("@@"):
        return value[1:], flag
    if value.startswith("@"):
        if not value[1:]:
            raise UsageError(f"{flag} @: give a file after @ (e.g. {flag} @notes.txt), or - for standard input")
        try:
            return read_text_file(value[1:], flag), value[1:]
        except InputError as exc:
            raise UsageError(str(exc)) from exc
    bad = next((i for i, char in enumerate(value) if "\ud800" <= char <= "\udfff"), None)
    if bad is not None:
        # How a byte that is not UTF-8 reaches Python from the command line (surrogateescape).
        raise UsageError(f"{flag}: the text is not valid UTF-8 (at character {bad + 1}); pass it in UTF-8, or as @FILE")
    if _names_a_file(value):
        log.warning("%s is read as text; to read the file %s instead, pass %s @%s", flag, value, flag, value)
    return value, flag


def _names_a_file(value: str) -> bool:
    """Whether a short, space-free value is also an existing file's name (only for the hint: never read)."""
    if len(value) > 255 or not value or any(c.isspace() or c == "\0" for c in value):
        return False
    try:
        return Path(value).is_file()
    except (OSError, ValueError):
        return False


def read_json(path: Path, flag: str) -> Any:
    """A JSON file a user named; every failure a UsageError naming the option, the file and the place."""
    try:
        return read_json_file(path, flag)
    except InputError as exc:
        raise UsageError(str(exc)) from exc


def check_input(source: Path) -> None:
    """Refuse, in one line saying why, an input a batch cannot read twice (it is counted, then read, and read
    again on resume)."""
    if str(source) == "-":
        raise UsageError("--input -: a batch reads a file (it is read again to resume); save the input to a file")
    if source.is_dir():
        raise UsageError(f"--input {source} is a directory; give a JSONL, JSON or CSV file")
    if source.exists() and not source.is_file():
        raise UsageError(f"--input {source} is not a regular file; give a JSONL, JSON or CSV file")
    if not source.exists():
        raise UsageError(f"--input: no such file: {source}")


def check_output(source: Path, output: Path) -> None:
    """Refuse, in one line, an output that would overwrite the input or cannot be written."""
    if str(output) == "-":
        # Not a file named "-" in the working folder, and not standard output either: the results log is read
        # back to resume an interrupted batch, which a pipe cannot be.
        raise UsageError(
            "--output -: the results log must be a file (a batch reads it back to resume); give a path, and "
            "`cat` it or `debate report` it after"
        )
    if output.resolve() == source.resolve() or (output.exists() and output.samefile(source)):
        raise UsageError(f"--input and --output are the same file ({output}); results need their own file")
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; give a file path")
    if output.exists() and not output.is_file():
        raise UsageError(f"--output {output} is not a regular file: the results log is read back to resume a batch")
    parent = output.parent
    for ancestor in [parent, *parent.parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise UsageError(f"--output {output}: {ancestor} is a file, not a directory")
            break
    # Written to as the run will write it, and left as it was found: a run refused after this check (a setting,
    # a file it needs) leaves no empty output or folder behind.
    made = [p for p in [parent, *parent.parents] if not p.exists()]
    existed = output.exists()
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with output.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write there ({exc.strerror})") from exc
    finally:
        if not existed:
            output.unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):  # another process may have put a file there meanwhile
                folder.rmdir()


def one_input(args: argparse.Namespace) -> TaskInput:
    """`debate verify`'s one item (--answer, --question, --evidence, --sources), read and checked before any model
    or endpoint is asked; a problem names the option the user gave."""
    return _checked(_read_input(args), args)


def _read_input(args: argparse.Namespace) -> TaskInput:
    answer, _ = read_text_arg(args.answer, "--answer")
    question, _ = read_text_arg(args.question, "--question")
    if answer is None or not answer.strip():
        raise UsageError("give a non-empty --answer (with --question and --evidence), or --input and --output")
    evidence, evidence_source = read_text_arg(args.evidence, "--evidence")
    reference: Any = evidence
    if args.task == "rag":
        if args.sources is None:
            raise UsageError("--task rag needs --sources FILE (JSON {id: text} or [{id, text, parent_id}])")
        reference = read_json(Path(args.sources), "--sources")
    return TaskInput(response=answer, question=question, reference=reference, reference_source=evidence_source)


def _checked(item: TaskInput, args: argparse.Namespace) -> TaskInput:
    """The item refused before any model starts, naming the option the user gave (not the API's field)."""
    from debate.pipeline import checked_input
    from debate.tasks import sources_from

    try:
        checked = checked_input(item, args.task)
    except InputError as exc:
        raise UsageError(_as_option(str(exc), args)) from exc
    if args.task == "rag":
        if checked.reference is None:
            raise UsageError(f"--sources {args.sources}: holds no sources (JSON {{id: text}} or [{{id, text}}])")
        try:
            sources_from(checked.reference)  # the sources file read as the task will read it
        except InputError as exc:
            raise UsageError(f"--sources {args.sources}: {str(exc).removeprefix('reference: ')}") from exc
    return checked


def _as_option(message: str, args: argparse.Namespace) -> str:
    """An item error as the command line says it: `reference[0]: ...` becomes `--sources FILE [0]: ...`."""
    named = {"reference": f"--sources {args.sources}" if args.task == "rag" else "--evidence"}
    named |= {"response": "--answer", "question": "--question"}
    field, sep, rest = message.partition(":")
    base, within = re.match(r"([a-z_]*)(.*)", field).groups()  # type: ignore[union-attr]  # always matches
    if not sep or base not in named:
        return message
    return f"{named[base]}{f' {within}' if within else ''}:{rest}"
