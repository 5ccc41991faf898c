"""The per-key cap on audits waiting or running, held atomically: the count and the insert it allows happen in one
transaction that no other submission of the same key can interleave with (two simultaneous 1,000-line batches under
a cap of 1,000 queued 2,000 when the count was read first and the batch written after)."""

from __future__ import annotations

import hashlib

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from markov_debate.desk.store.db import PendingLimitError
from markov_debate.desk.tables import AuditRow

__all__ = ["hold_pending"]


def hold_pending(s: Session, dialect: str, submitted_by: str, adding: int, limit: int) -> None:
    """In the write transaction `s`, before its inserts: raise PendingLimitError when `adding` more audits would
    leave `submitted_by` with more than `limit` waiting or running. On PostgreSQL a transaction-scoped advisory lock
    per key orders the key's submissions (other keys never wait); on SQLite every write transaction begins
    IMMEDIATE, so writers are already one at a time."""
    if dialect == "postgresql":
        key = int.from_bytes(hashlib.sha256(f"pending|{submitted_by}".encode()).digest()[:8], "big", signed=True)
        s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
    query = select(func.count()).where(
        AuditRow.submitted_by == submitted_by, AuditRow.status.in_(("pending", "running"))
    )
    waiting = int(s.scalar(query) or 0)
    if waiting + adding > limit:
        raise PendingLimitError(submitted_by, waiting=waiting, adding=adding, limit=limit)
