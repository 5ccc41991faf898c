"""A persistent cache of model calls: a cached re-run of an experiment makes no endpoint calls.

Keyed by a hash of everything that shapes the reply (endpoint model, messages, schema, logprob options, sampling
settings), stored in SQLite. A cached reply is returned as it was, usage included, so reports stay identical.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from debate.llm.base import ChatClient, ChatRequest, ChatResponse

__all__ = ["CachingChatClient"]


class CachingChatClient:
    """Wraps a ChatClient; `hits` and `misses` count this process's lookups."""

    def __init__(
        self, inner: ChatClient, *, path: str | Path, settings: dict[str, Any] | None = None, owns_inner: bool = True
    ) -> None:
        self._inner = inner
        self._owns_inner = owns_inner
        self._settings = settings or {}
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    def key(self, request: ChatRequest) -> str:
        payload = {"model": self._inner.model_name, "settings": self._settings, "request": request.model_dump()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls (key, response) VALUES (?, ?)", (key, value))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key = self.key(request)
        stored = await asyncio.to_thread(self._get, key)
        if stored is not None:
            self.hits += 1
            return ChatResponse.model_validate_json(stored)
        self.misses += 1
        response = await self._inner.complete(request)
        await asyncio.to_thread(self._put, key, response.model_dump_json())
        return response

    async def aclose(self) -> None:
        with self._lock:
            self._db.close()
        if self._owns_inner:
            await self._inner.aclose()
