"""What a run records about the code that produced it: the package version and the git commit, looked up once."""

from __future__ import annotations

import functools
import hashlib
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["depended_files", "git_commit", "package_version"]


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


_DEPENDED = (("debate", "calibration"), ("search", "collection"), ("prompt_set",))
"""Settings that name a file (or a folder of prompt files) whose content decides verdicts."""


def depended_files(config: dict[str, Any]) -> dict[str, str]:
    """The sha256 of each file the verdicts of a run under `config` (VerifierConfig as JSON) depend on, by the
    setting that names it (`debate.calibration`, `search.collection`, `prompt_set` when a folder): a file changed in
    place, under the same name, is then a changed setting. A named file that cannot be read is left out (the run
    itself refuses it)."""
    found: dict[str, str] = {}
    for path in _DEPENDED:
        value: Any = config
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value:
            continue
        digest = _digest(Path(value))
        if digest is not None:
            found[".".join(path)] = digest
    return found


def _digest(path: Path) -> str | None:
    """A file's sha256, or a folder's over its files' names and contents (sorted); None when unreadable."""
    try:
        if path.is_dir():
            sha = hashlib.sha256()
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                sha.update(child.relative_to(path).as_posix().encode() + b"\0" + child.read_bytes() + b"\0")
            return sha.hexdigest()
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    return None
