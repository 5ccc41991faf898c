"""API keys, roles and the identity a request is attributed to. Keys are kept as sha256 hashes only."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.errors import UsageError

__all__ = [
    "NAME_ALPHABET",
    "ROLE_PERMISSIONS",
    "ApiKey",
    "Permission",
    "Principal",
    "Role",
    "find_key",
    "guard_key_table",
    "hash_key",
    "key_line",
    "key_name",
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


NAME_ALPHABET = r"^[A-Za-z0-9_.@-]{1,64}$"
"""A key's name: 1 to 64 of A-Z, a-z, 0-9, `_`, `.`, `@` and `-` (no `:`, which separates a keys line's fields; no
white space or line break, which would make another line)."""


class ApiKey(BaseModel):
    """One configured key: its owner's name (the reviewer identity), role and the key's sha256."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=NAME_ALPHABET)
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


def key_name(name: str) -> str:
    """`name` if it is a key name (`NAME_ALPHABET`).

    Raises:
        UsageError: it is not, said in one line.
    """
    if not re.fullmatch(NAME_ALPHABET, name):
        raise UsageError(
            f"key name {name!r}: 1 to 64 of A-Z, a-z, 0-9, '_', '.', '@' and '-' (a ':' or a line break would make "
            "the keys line say something else)"
        )
    return name


def key_line(name: str, role: Role, key: str) -> str:
    """The keys-file line of `key` (its sha256 only), the one form every keys file holds: checked to read back as
    exactly this name, role and key."""
    line = f"{key_name(name)}:{role}:sha256:{hash_key(key)}"
    parsed = _parse(line, "the new line")
    assert (parsed.name, parsed.role, parsed.sha256) == (name, role, hash_key(key)), line  # one parser reads it
    return line


def guard_key_table(name: str, key: str) -> str:
    """The guard's form of `key` (its sha256 only): a `[keys.NAME]` table for --guard-config, checked to read back
    as exactly this name and hash. (The name is quoted: TOML's bare keys take no `.` or `@`.)"""
    table = f'[keys.{json.dumps(key_name(name))}]\nsha256 = "{hash_key(key)}"'
    read = tomllib.loads(table)["keys"]
    assert read == {name: {"sha256": hash_key(key)}}, table  # the guard's reader gets back what was written
    return table


def _parse(entry: str, where: str) -> ApiKey:
    parts = entry.strip().split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{where}: expected NAME:ROLE:KEY or NAME:ROLE:sha256:HEX, got {len(parts)} field(s)")
    name, role, key = parts
    if role not in ROLE_PERMISSIONS:
        raise UsageError(f"{where}: role {role!r} is not one of {', '.join(ROLE_PERMISSIONS)}")
    if ":" in key and not key.startswith("sha256:"):
        # `eve:admin:submitter:sha256:HEX` (a name that held a colon) would read as user eve, role admin, and the
        # plain key "submitter:sha256:HEX", known to whoever reads the file
        raise UsageError(f"{where}: more fields than NAME:ROLE:KEY or NAME:ROLE:sha256:HEX (a key holds no ':')")
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
