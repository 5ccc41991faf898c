"""UI sessions ended before their time (logout), shared by every server on the same store."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete

from markov_debate.desk.store.db import Database, utcnow
from markov_debate.desk.tables import RevokedSessionRow

__all__ = ["SessionStore"]


class SessionStore(Database):
    """Revoked UI sessions."""

    # --- sessions --------------------------------------------------------------------------------------------

    def revoke_session(self, session_id: str, expires_at: datetime) -> None:
        """End a UI session now (logout), on every server that shares this store."""
        with self._session.begin() as s:
            s.execute(delete(RevokedSessionRow).where(RevokedSessionRow.expires_at < utcnow()))
            if s.get(RevokedSessionRow, session_id) is None:
                s.add(RevokedSessionRow(session_id=session_id, expires_at=expires_at))

    def session_revoked(self, session_id: str) -> bool:
        with self._read() as s:
            return s.get(RevokedSessionRow, session_id) is not None
