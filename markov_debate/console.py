"""The `debate` console script. Importing the engine takes a moment; a Ctrl-C during it is still one line and
exit 130, like a Ctrl-C anywhere later (which `debate.cli.main` handles)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    try:
        from debate import cli
    except KeyboardInterrupt:
        sys.stderr.write("debate: interrupted\n")
        return 130
    return cli.main()
