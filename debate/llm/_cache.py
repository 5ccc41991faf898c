"""A persistent cache of model calls: a cached re-run makes no endpoint calls.

The key is everything that determines the answer: the endpoint (base URL), the model, every request setting
(temperature, max tokens, seed, structured-output mode, schema, logprob options), the messages, and, when the
temperature is above 0, the call's site (claim, state, round, attempt), so two rounds that send the same request
get two samples as they would from the endpoint. Only replies the caller accepted as usable are stored; errors and
unusable replies are never cached. Stored in SQLite (WAL); a cached reply is returned as it was, usage included.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from debate.files import private_file
from debate.llm._base import ChatClient, ChatRequest, ChatResponse

__all__ = ["CACHE_FILE", "DEFAULT_CACHE_DIR", "CacheStats", "CachingChatClient", "cache_stats", "clear_cache"]

CACHE_FILE = "calls.sqlite"
"""The cache's file name inside a cache directory."""
DEFAULT_CACHE_DIR = Path("runs") / ".cache"
"""Where `debate eval` keeps its cache (under its --runs-root)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL, endpoint TEXT NOT NULL, "
    "model TEXT NOT NULL, created_at REAL NOT NULL)"
)
_PENDING_MAX = 4096


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(private_file(path), check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
    if columns and "endpoint" not in columns:
        # A cache from before the key named the endpoint: its entries cannot be trusted, so it starts empty.
        db.execute("DROP TABLE calls")
    db.execute(_SCHEMA)
    return db


class CachingChatClient:
    """Wraps a ChatClient; `hits` and `misses` count this process's lookups."""

    def __init__(
        self,
        inner: ChatClient,
        *,
        path: str | Path,
        endpoint: str,
        settings: dict[str, Any] | None = None,
        owns_inner: bool = True,
    ) -> None:
        self._inner = inner
        self._owns_inner = owns_inner
        self._endpoint = endpoint
        self._settings = settings or {}
        self._sampled = float(self._settings.get("temperature") or 0.0) > 0.0
        self._path = Path(path)
        self._db = _connect(self._path)
        self._lock = threading.Lock()
        self._pending: OrderedDict[int, tuple[ChatResponse, str]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.stored = 0

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    def key(self, request: ChatRequest) -> str:
        exclude = {"purpose"} | (set() if self._sampled else {"site"})
        payload = {
            "endpoint": self._endpoint,
            "model": self._inner.model_name,
            "settings": self._settings,
            "request": request.model_dump(exclude=exclude),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, response, endpoint, model, created_at) VALUES (?, ?, ?, ?, ?)",
                (key, value, self._endpoint, self._inner.model_name, time.time()),
            )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key = self.key(request)
        stored = await asyncio.to_thread(self._get, key)
        if stored is not None:
            self.hits += 1
            return ChatResponse.model_validate_json(stored)
        self.misses += 1
        response = await self._inner.complete(request)
        # Kept only once the caller accepts it: an unusable reply must not be replayed on the next run.
        self._pending[id(response)] = (response, key)
        while len(self._pending) > _PENDING_MAX:
            self._pending.popitem(last=False)
        return response

    async def accept(self, response: ChatResponse) -> None:
        entry = self._pending.pop(id(response), None)
        if entry is not None and entry[0] is response:
            await asyncio.to_thread(self._put, entry[1], response.model_dump_json())
            self.stored += 1
        await self._inner.accept(response)

    async def aclose(self) -> None:
        with self._lock:
            self._db.close()
        if self._owns_inner:
            await self._inner.aclose()


class CacheStats(BaseModel):
    """What a call cache holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    """The SQLite file."""
    entries: int
    """Cached replies."""
    size_bytes: int
    """File size (WAL included)."""
    by_endpoint: dict[str, int]
    """Entries per `endpoint model`."""


def cache_stats(path: str | Path) -> CacheStats:
    """The cache file's entries, size and entries per endpoint (`debate cache stats`); a missing file is empty."""
    path = Path(path)
    if not path.is_file():
        return CacheStats(path=str(path), entries=0, size_bytes=0, by_endpoint={})
    db = _connect(path)
    try:
        rows = db.execute("SELECT endpoint, model, COUNT(*) FROM calls GROUP BY endpoint, model").fetchall()
    finally:
        db.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return CacheStats(
        path=str(path),
        entries=sum(n for _, _, n in rows),
        size_bytes=size,
        by_endpoint={f"{endpoint} {model}": n for endpoint, model, n in rows},
    )


def clear_cache(path: str | Path, *, endpoint: str | None = None) -> int:
    """Delete every entry (or those of one endpoint); returns how many were deleted."""
    path = Path(path)
    if not path.is_file():
        return 0
    db = _connect(path)
    try:
        if endpoint is None:
            deleted = db.execute("DELETE FROM calls").rowcount
        else:
            deleted = db.execute("DELETE FROM calls WHERE endpoint = ?", (endpoint,)).rowcount
        db.execute("VACUUM")
    finally:
        db.close()
    return int(deleted)
