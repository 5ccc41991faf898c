"""The `debate` console script. Importing the engine takes seconds; `--version` answers without it, and a Ctrl-C
during the import is still one line and exit 130, like a Ctrl-C anywhere later (which `debate.cli.main` handles)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("markov-debate")
    except PackageNotFoundError:
        return "unknown"


def main() -> int:
    if sys.argv[1:] in (["--version"], ["-V"]):
        sys.stdout.write(f"debate (markov-debate) {_version()}\n")
        return 0
    try:
        from debate import cli
    except KeyboardInterrupt:
        sys.stderr.write("debate: interrupted\n")
        return 130
    return cli.main()
