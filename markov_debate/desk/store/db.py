"""The audit store's database: the engine (SQLite in WAL mode, or PostgreSQL), its per-connection settings, and
the migrations applied on open; the store's errors and small helpers shared by its parts."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection, CursorResult, Result, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import sessionmaker

from debate.errors import DebateError
from debate.files import private_file
from markov_debate.desk.models import EngineLabel
from markov_debate.desk.requests import AuditRequest

__all__ = [
    "CancelledReplayError",
    "ConflictError",
    "Database",
    "Job",
    "NotFoundError",
    "ReviewConflictError",
    "StoreError",
    "count",
    "engine_label",
    "sha",
    "store_away",
    "store_cause",
    "utcnow",
]

_MIGRATIONS = Path(__file__).parent.parent / "migrations"
_MIGRATION_LOCK = threading.Lock()


def store_away(exc: BaseException) -> bool:
    """Whether a store error means "not reachable now" (worth waiting for: a restart, a full disk, a failover), not
    "refused this write" (a value it cannot hold, a constraint): the one rule the worker and the API answer by."""
    return isinstance(exc, OSError | OperationalError | InterfaceError | DisconnectionError) or bool(
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def store_cause(exc: BaseException, limit: int = 300) -> str:
    """A store error in one line without its statement: the database's own message (SQLAlchemy's text adds the SQL
    and its parameters, a caller's words among them, over several lines)."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:limit] if text and text[0] else type(exc).__name__


class StoreError(DebateError):
    """A request the store cannot honour (the API turns it into a 4xx)."""

    kind = "input"


class NotFoundError(StoreError):
    """No such audit, claim or batch."""


class ConflictError(StoreError):
    """The request conflicts with what is stored (an idempotency key reused for another body, a finished job)."""


class CancelledReplayError(ConflictError):
    """An Idempotency-Key replayed after its audit was cancelled."""

    def __init__(self, message: str, *, audit_id: int) -> None:
        super().__init__(message)
        self.audit_id = audit_id


class PendingLimitError(StoreError):
    """A submission that would leave its key more audits waiting or running than the cap allows (429)."""

    retry_after_s = 30
    """About how long a worker takes to make room."""

    def __init__(self, name: str, *, waiting: int, adding: int, limit: int) -> None:
        room = max(0, limit - waiting)
        super().__init__(
            f"{name} has {waiting} audit(s) waiting or running; at most {limit}, so {adding} more do not fit "
            f"(room for {room}); try again when some have finished"
        )


class ReviewConflictError(ConflictError):
    """A review made on a stale view: the claim's label changed after the reviewer saw it."""

    def __init__(self, message: str, *, audit_id: int, claim_id: str, current_label: str, reviewed_by: str) -> None:
        super().__init__(message)
        self.audit_id, self.claim_id = audit_id, claim_id
        self.current_label = current_label
        self.reviewed_by = reviewed_by


def count(result: Result[Any]) -> int:
    """Rows an UPDATE changed (every UPDATE here runs on a cursor, which has the count)."""
    return int(cast("CursorResult[Any]", result).rowcount)


def utcnow() -> datetime:
    """Naive UTC: stored the same way on SQLite and PostgreSQL."""
    return datetime.now(UTC).replace(tzinfo=None)


def engine_label(claim: dict[str, Any]) -> EngineLabel:
    label = claim.get("label")
    return label if label in ("factual", "non_factual", "not_enough_evidence") else "unverifiable"


@dataclass(frozen=True)
class Job:
    """A claimed audit: what the worker runs."""

    audit_id: int
    request: AuditRequest
    attempts: int


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Database:
    """The store's connection: `engine`, a `_session` factory, the dialect; the schema brought to the current
    revision on open (concurrent starts serialised)."""

    def __init__(self, url: str, *, price_prompt_per_mtok: float = 0.0, price_completion_per_mtok: float = 0.0) -> None:
        self.url = url
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                # Each connection (the server's threads, its reads, its upload processes) would see a database of
                # its own, empty: the store must be a file.
                raise StoreError(f"an in-memory SQLite store ({url}) cannot be shared: give a file, sqlite:///PATH")
            private_file(Path(parsed.database))  # audits and reviews are nobody else's to read
        self.engine: Engine = create_engine(url, pool_pre_ping=True)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_setup(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self.reader: Engine = self.engine
        """The engine read-only sessions use (on SQLite its own connections, whose reads never wait for a writer)."""
        if self.dialect == "sqlite":
            # Reads get their own connections whose transactions start deferred: in WAL mode they then never wait
            # for a writer (a 10,000-line batch insert held health and every page for seconds behind its lock).
            self.reader = create_engine(url, pool_pre_ping=True)
            _sqlite_setup(self.reader, begin="BEGIN")
        self._read = sessionmaker(self.reader, expire_on_commit=False)
        """Sessions for reading only (never write in one: on SQLite it would fail at once on a busy store)."""
        self._prices = (price_prompt_per_mtok, price_completion_per_mtok)
        self.migrate()

    def migrate(self) -> None:
        """Bring the schema to the newest migration (a no-op when it is current)."""
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        # Alembic keeps its context in module globals (one migration per process at a time), and servers that
        # start together must not both create the schema: PostgreSQL serialises them with an advisory lock,
        # SQLite with the BEGIN IMMEDIATE every transaction here starts with.
        with _MIGRATION_LOCK, self.engine.begin() as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(7405921)"))
            config.attributes["connection"] = conn
            _refuse_newer_schema(conn, config)
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()
        self.reader.dispose()

    def schema_revision(self) -> str | None:
        with self.reader.connect() as conn:
            return _revision(conn)


def _refuse_newer_schema(conn: Connection, config: Config) -> None:
    """A store written by a newer markov-debate is refused in one line, before Alembic fails on a revision it
    cannot locate."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(config)
    current = _revision(conn)
    if current is not None and current not in {script.revision for script in scripts.walk_revisions()}:
        raise StoreError(
            f"the store's schema is at revision {current}, which this version of markov-debate does not know (it "
            f"knows up to {scripts.get_current_head()}): upgrade markov-debate, or use another store"
        )


def _revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def _sqlite_setup(engine: Engine, *, begin: str = "BEGIN IMMEDIATE") -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling is turned off so that every transaction starts with BEGIN IMMEDIATE:
        # a deferred one that reads and then writes can fail with "database is locked" at once, busy timeout or not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql(begin)
