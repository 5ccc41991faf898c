"""What a run records about the code that produced it: the package version and the git commit, looked up once."""

from __future__ import annotations

import functools
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["git_commit", "package_version"]


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout this package runs from, if any."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


@functools.cache
def package_version() -> str:
    """The installed version of markov-debate ("unknown" when run from a tree that is not installed)."""
    try:
        return version("markov-debate")
    except PackageNotFoundError:
        return "unknown"
