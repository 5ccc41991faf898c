"""API keys, roles and the identity a request is attributed to. Keys are kept as sha256 hashes only."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.errors import UsageError

__all__ = [
    "ROLE_PERMISSIONS",
    "ApiKey",
    "Permission",
    "Principal",
    "Role",
    "find_key",
    "hash_key",
    "load_keys",
    "new_key",
]

Role = Literal["submitter", "reviewer", "admin"]
Permission = Literal["read", "submit", "review", "export", "cancel"]

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    "submitter": frozenset({"read", "submit", "cancel"}),
    "reviewer": frozenset({"read", "review", "export"}),
    "admin": frozenset({"read", "submit", "review", "export", "cancel"}),
}
"""What each role may do: submitters send work, reviewers sign it off, admins do both."""


class ApiKey(BaseModel):
    """One configured key: its owner's name (the reviewer identity), role and the key's sha256."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.@-]+$")
    """Who holds the key; every request made with it is attributed to this name."""
    role: Role
    """What the key may do."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 hex of the key."""


class Principal(BaseModel):
    """Who made a request."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Key name, or `local` when the desk runs without keys (loopback only)."""
    role: Role
    """Its role."""

    def may(self, permission: Permission) -> bool:
        return permission in ROLE_PERMISSIONS[self.role]

    @property
    def owner(self) -> str | None:
        """Whose audits and batches this principal may read, cancel and retry: a submitter its own only (its
        name); reviewers and admins all (None)."""
        return self.name if self.role == "submitter" else None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return "mdk_" + secrets.token_urlsafe(24)


def _parse(entry: str, where: str) -> ApiKey:
    parts = entry.strip().split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{where}: expected NAME:ROLE:KEY or NAME:ROLE:sha256:HEX, got {len(parts)} field(s)")
    name, role, key = parts
    if role not in ROLE_PERMISSIONS:
        raise UsageError(f"{where}: role {role!r} is not one of {', '.join(ROLE_PERMISSIONS)}")
    digest = key.removeprefix("sha256:") if key.startswith("sha256:") else hash_key(key)
    try:
        return ApiKey(name=name, role=role, sha256=digest)
    except ValidationError as exc:
        raise UsageError(f"{where}: {exc.errors()[0]['msg']}") from exc


def load_keys(path: Path | None, env: str | None = None) -> list[ApiKey]:
    """Keys from a file (one NAME:ROLE:KEY or NAME:ROLE:sha256:HEX per line; # comments) and from DEBATE_API_KEYS
    (comma-separated, same forms). Plain keys are hashed at once and never kept."""
    keys: list[ApiKey] = []
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--api-keys-file: cannot read {path}: {exc.strerror}") from exc
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                keys.append(_parse(line, f"{path}:{number}"))
    raw = os.environ.get("DEBATE_API_KEYS", "") if env is None else env
    for index, entry in enumerate(e for e in raw.split(",") if e.strip()):
        keys.append(_parse(entry, f"DEBATE_API_KEYS entry {index + 1}"))
    names = [k.name for k in keys]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"API key names must be unique (they identify reviewers): {', '.join(duplicates)}")
    return keys


def find_key(keys: list[ApiKey], presented: str) -> ApiKey | None:
    digest = hash_key(presented)
    found = None
    for key in keys:
        # Every key is compared, in constant time, so timing does not tell which prefix matched.
        if hmac.compare_digest(key.sha256, digest):
            found = key
    return found
