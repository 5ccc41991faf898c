"""Files that hold what others on the machine should not read (model replies, audits, reviews)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["private_file"]


def private_file(path: Path) -> Path:
    """Create `path` (and its folder) readable and writable by its owner only, or make an existing one so, before
    a database opens it: SQLite gives its -wal and -shm files the same mode as the database file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)
    return path
