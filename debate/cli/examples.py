"""A command's examples as its help shows them: each within a classic terminal's width, so it copies whole."""

from __future__ import annotations

import textwrap

__all__ = ["EXAMPLE_COLUMNS", "examples"]

EXAMPLE_COLUMNS = 80
"""The widest an example line may be: a terminal's classic width, so an example copies whole from any of them."""


def examples(*lines: str, extra: str = "") -> str:
    """A subcommand's epilog: its examples (each a command line, optionally `# what it does` first), then `extra`.
    A line wider than EXAMPLE_COLUMNS is split as a shell reads it: its comment on a line of its own above, the
    command continued with `\\` at a space (a quoted argument is never split)."""
    shown: list[str] = []
    for line in lines:
        shown += _fitted(f"  {line}")
    text = "examples:\n" + "\n".join(shown)
    return text + (f"\n\n{extra}" if extra else "")


def _fitted(line: str) -> list[str]:
    if len(line) <= EXAMPLE_COLUMNS:
        return [line]
    command, mark, comment = line.partition("  # ")
    if not command.strip():  # a comment line of its own
        text = comment.strip() if mark else line.strip().removeprefix("#").strip()
        return textwrap.wrap(text, EXAMPLE_COLUMNS, initial_indent="  # ", subsequent_indent="  # ")
    above = textwrap.wrap(comment.strip(), EXAMPLE_COLUMNS, initial_indent="  # ", subsequent_indent="  # ")
    words, out, current = _shell_words(command.strip()), [], "  "
    for word in words:
        if len(current) + len(word) + 3 > EXAMPLE_COLUMNS and current.strip():
            out.append(current.rstrip() + " \\")
            current = "      "
        current += word + " "
    return [*above, *out, current.rstrip()]


def _shell_words(command: str) -> list[str]:
    """`command` split at the spaces outside quotes (each word kept as written, quotes included), a flag kept
    together with its value."""
    words = _split_words(command)
    joined: list[str] = []
    for word in words:
        if joined and joined[-1].startswith("-") and " " not in joined[-1] and not word.startswith("-"):
            joined[-1] += " " + word
        else:
            joined.append(word)
    return joined


def _split_words(command: str) -> list[str]:
    words, current, quote = [], "", ""
    for char in command:
        if char in "\"'" and (not quote or quote == char):
            quote = "" if quote else char
        if char == " " and not quote:
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    return [*words, current] if current else words
