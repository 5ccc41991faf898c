"""The audit store: submissions, jobs with leases, reports kept as produced, reviews and the trail.

One class over SQLAlchemy 2, the same on SQLite (WAL; the default) and PostgreSQL (several servers and workers),
assembled from its parts: `db` (engine, migrations), `audits` (submit and read), `jobs` (the lease protocol:
claimed with a guarded UPDATE, preceded on PostgreSQL by `SELECT ... FOR UPDATE SKIP LOCKED`, so two workers never
take the same audit; a result stored only by the worker still holding the audit), `reviews`, `guarded` (the
guard's decisions). Statistics over the
store are in `markov_debate.desk.stats`.
"""

from markov_debate.desk.store.db import (
    CancelledReplayError,
    ConflictError,
    Job,
    NotFoundError,
    PendingLimitError,
    ReviewConflictError,
    StoreError,
    engine_label,
    utcnow,
)
from markov_debate.desk.store.guarded import GuardRecord, GuardRows, GuardStore, storable, storable_json
from markov_debate.desk.store.jobs import JobStore
from markov_debate.desk.store.reviews import ReviewStore

__all__ = [
    "CancelledReplayError",
    "ConflictError",
    "GuardRecord",
    "GuardRows",
    "Job",
    "NotFoundError",
    "PendingLimitError",
    "ReviewConflictError",
    "Store",
    "StoreError",
    "engine_label",
    "storable",
    "storable_json",
    "utcnow",
]


class Store(JobStore, ReviewStore, GuardStore):
    """The audit store at `url` (migrated to the current schema on open)."""
