"""The audit store: submissions, jobs with leases, reports kept as produced, reviews and the trail.

One class over SQLAlchemy 2, the same on SQLite (WAL; the default) and PostgreSQL (several servers and workers).
Jobs are claimed with a guarded UPDATE (`... WHERE status = 'pending'`), preceded on PostgreSQL by
`SELECT ... FOR UPDATE SKIP LOCKED`, so two workers never take the same audit; a running audit carries a lease that
its worker renews, and one whose lease ran out goes back to the queue. A result is stored only by the worker that
still holds the audit, so an audit is finished at most once, whatever crashed in between.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

from alembic import command
from alembic.config import Config
from pydantic import ValidationError
from sqlalchemy import Engine, and_, create_engine, delete, event, exists, func, or_, select, text, update
from sqlalchemy.engine import Connection, CursorResult, Result, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from debate.errors import DebateError
from debate.files import private_file
from debate.types import Report
from desk.auth import Principal
from desk.models import (
    AgreementPoint,
    AuditDetail,
    AuditPage,
    AuditRequest,
    AuditSummary,
    BatchInfo,
    EngineLabel,
    EventInfo,
    QueueItem,
    ReviewIn,
    ReviewInfo,
    Stats,
    load_request,
)
from desk.tables import AuditRow, BatchRow, ClaimRow, EventRow, ReviewRow, RevokedSessionRow

__all__ = ["ConflictError", "Job", "NotFoundError", "Store", "StoreError", "engine_label", "utcnow"]

_MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = threading.Lock()
_LABELS: list[EngineLabel] = ["factual", "non_factual", "not_enough_evidence", "unverifiable"]


class StoreError(DebateError):
    """A request the store cannot honour (the API turns it into a 4xx)."""

    kind = "input"


class NotFoundError(StoreError):
    """No such audit, claim or batch."""


class ConflictError(StoreError):
    """The request conflicts with what is stored (an idempotency key reused for another body, a finished job)."""


def _count(result: Result[Any]) -> int:
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


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Store:
    """The audit store at `url` (migrated to the current schema on open)."""

    def __init__(self, url: str, *, price_prompt_per_mtok: float = 0.0, price_completion_per_mtok: float = 0.0) -> None:
        self.url = url
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            private_file(Path(parsed.database))  # audits and reviews are nobody else's to read
        self.engine: Engine = create_engine(url, pool_pre_ping=True)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_setup(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
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
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()

    def queue_health(self) -> tuple[int, float | None, float | None]:
        """(pending audits that are due, seconds the oldest of them has waited, seconds since any worker last
        claimed, finished, deferred or failed an audit): what `/v1/health` judges progress by."""
        with self._session() as s:
            now = utcnow()
            due = (AuditRow.status == "pending", or_(AuditRow.not_before.is_(None), AuditRow.not_before <= now))
            count, oldest = s.execute(select(func.count(), func.min(AuditRow.created_at)).where(*due)).one()
            last = s.scalars(
                select(EventRow.at)
                .where(EventRow.kind.in_(("claimed", "finished", "deferred", "failed")))
                .order_by(EventRow.id.desc())
                .limit(1)
            ).first()
        return (
            int(count),
            None if oldest is None else (now - oldest).total_seconds(),
            None if last is None else (now - last).total_seconds(),
        )

    def schema_revision(self) -> str | None:
        with self.engine.connect() as conn:
            return _revision(conn)

    # --- sessions --------------------------------------------------------------------------------------------

    def revoke_session(self, session_id: str, expires_at: datetime) -> None:
        """End a UI session now (logout), on every server that shares this store."""
        with self._session.begin() as s:
            s.execute(delete(RevokedSessionRow).where(RevokedSessionRow.expires_at < utcnow()))
            if s.get(RevokedSessionRow, session_id) is None:
                s.add(RevokedSessionRow(session_id=session_id, expires_at=expires_at))

    def session_revoked(self, session_id: str) -> bool:
        with self._session() as s:
            return s.get(RevokedSessionRow, session_id) is not None

    # --- submission ------------------------------------------------------------------------------------------

    def submit(
        self,
        principal: Principal,
        request: AuditRequest,
        *,
        idempotency_key: str | None = None,
        batch_id: int | None = None,
        batch_line: int | None = None,
        session: Session | None = None,
    ) -> tuple[int, bool]:
        """Queue one audit; (id, created). The same idempotency key with the same body returns the first audit,
        also when two such requests race (the database's unique index decides; the loser reads the winner's)."""
        if idempotency_key is not None and session is None:
            try:
                return self._submit(principal, request, idempotency_key=idempotency_key)
            except IntegrityError:
                pass  # another request with this key committed first: the next look finds its audit
        return self._submit(principal, request, idempotency_key=idempotency_key, batch_id=batch_id,
                            batch_line=batch_line, session=session)  # fmt: skip

    def _submit(
        self,
        principal: Principal,
        request: AuditRequest,
        *,
        idempotency_key: str | None = None,
        batch_id: int | None = None,
        batch_line: int | None = None,
        session: Session | None = None,
    ) -> tuple[int, bool]:
        body = request.model_dump_json()
        digest = _sha(body)
        with nullcontext(session) if session is not None else self._session.begin() as s:
            if idempotency_key is not None:
                found = s.scalars(
                    select(AuditRow).where(
                        AuditRow.submitted_by == principal.name, AuditRow.idempotency_key == idempotency_key
                    )
                ).first()
                if found is not None:
                    if found.request_sha256 != digest:
                        raise ConflictError(
                            f"idempotency key {idempotency_key!r} was used for a different request (audit {found.id})"
                        )
                    if found.status == "failed":
                        # Sending it again is asking for it to be done: the same audit goes back to the queue.
                        self._requeue_failed(s, found, principal.name)
                    return found.id, False
            now = utcnow()
            row = AuditRow(
                created_at=now,
                submitted_by=principal.name,
                idempotency_key=idempotency_key,
                request_sha256=digest,
                batch_id=batch_id,
                batch_line=batch_line,
                task=request.task,
                request_json=body,
                status="pending",
                attempts=0,
                llm_calls=0,
                prompt_tokens=0,
                completion_tokens=0,
                search_text=f"{request.question or ''}\n{request.response}".lower(),
            )
            s.add(row)
            s.flush()
            s.add(
                EventRow(
                    audit_id=row.id,
                    at=now,
                    kind="submitted",
                    actor=principal.name,
                    detail=f"batch {batch_id} line {batch_line}" if batch_id else None,
                )
            )
            return row.id, True

    def submit_batch(
        self,
        principal: Principal,
        *,
        name: str,
        task: str,
        items: Sequence[tuple[int, AuditRequest]],
        input_errors: list[dict[str, Any]],
    ) -> int:
        """Queue a batch in one transaction: all its readable lines, or nothing."""
        with self._session.begin() as s:
            batch = BatchRow(
                created_at=utcnow(),
                submitted_by=principal.name,
                name=name,
                task=task,
                total=len(items),
                input_errors=input_errors,
            )
            s.add(batch)
            s.flush()
            for line, request in items:
                self.submit(principal, request, batch_id=batch.id, batch_line=line, session=s)
            return batch.id

    # --- jobs ------------------------------------------------------------------------------------------------

    def claim(self, worker: str, lease_s: float, *, max_attempts: int = 5) -> Job | None:
        """Take the oldest pending audit that is due, or None. An audit already tried `max_attempts` times (whatever
        brought it back: a deferral, a lost lease, a stopped worker, a result the store refused) and one whose
        stored request cannot be read are marked failed with the reason instead, and the next one is taken: no
        audit is retried forever and none can stop the queue."""
        for _ in range(50):
            with self._session.begin() as s:
                now = utcnow()
                candidate = (
                    select(AuditRow.id)
                    .where(AuditRow.status == "pending", or_(AuditRow.not_before.is_(None), AuditRow.not_before <= now))
                    .order_by(AuditRow.id)
                    .limit(1)
                )
                if self.dialect == "postgresql":
                    candidate = candidate.with_for_update(skip_locked=True)
                audit_id = s.scalars(candidate).first()
                if audit_id is None:
                    return None
                taken = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "pending")
                    .values(
                        status="running",
                        worker=worker,
                        lease_until=now + timedelta(seconds=lease_s),
                        started_at=now,
                        attempts=AuditRow.attempts + 1,
                    )
                )
                if _count(taken) != 1:
                    continue  # another worker won the race: look again
                row = s.get_one(AuditRow, audit_id)
                if row.attempts > max_attempts:
                    self._quarantine(
                        s, row, worker, f"gave up after {row.attempts - 1} attempts: {row.error or 'no result'}"
                    )
                    continue
                try:
                    request = load_request(row.request_json)
                except ValidationError as exc:
                    self._quarantine(s, row, worker, f"the stored request cannot be read: {exc.errors()[0]['msg']}")
                    continue
                s.add(
                    EventRow(audit_id=audit_id, at=now, kind="claimed", actor=worker, detail=f"attempt {row.attempts}")
                )
                return Job(audit_id, request, row.attempts)
        return None

    @staticmethod
    def _quarantine(s: Session, row: AuditRow, worker: str, reason: str) -> None:
        now = utcnow()
        row.status, row.error, row.finished_at, row.worker, row.lease_until = "failed", reason, now, None, None
        s.add(EventRow(audit_id=row.id, at=now, kind="failed", actor=worker, detail=reason))

    def renew(self, worker: str, audit_ids: Sequence[int], lease_s: float) -> list[int]:
        """Extend the leases of a worker's running audits; the ids it no longer holds (cancelled or taken over)."""
        if not audit_ids:
            return []
        with self._session.begin() as s:
            s.execute(
                update(AuditRow)
                .where(AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running")
                .values(lease_until=utcnow() + timedelta(seconds=lease_s))
            )
            held = set(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running"
                    )
                )
            )
        return [i for i in audit_ids if i not in held]

    def lost(self, worker: str, audit_ids: Sequence[int]) -> list[int]:
        """The ids among `audit_ids` that `worker` no longer holds (cancelled, or taken over): a read, cheap enough
        for every pass of the worker's loop, so a cancel stops the work within one poll."""
        if not audit_ids:
            return []
        with self._session() as s:
            held = set(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.id.in_(audit_ids), AuditRow.worker == worker, AuditRow.status == "running"
                    )
                )
            )
        return [i for i in audit_ids if i not in held]

    def requeue_expired(self) -> list[int]:
        """Put running audits whose lease ran out (their worker died) back in the queue."""
        with self._session.begin() as s:
            now = utcnow()
            expired = list(
                s.scalars(select(AuditRow.id).where(AuditRow.status == "running", AuditRow.lease_until < now))
            )
            for audit_id in expired:
                done = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.lease_until < now)
                    .values(status="pending", worker=None, lease_until=None)
                )
                if _count(done) == 1:
                    s.add(
                        EventRow(
                            audit_id=audit_id, at=now, kind="requeued", actor=None, detail="the worker's lease ran out"
                        )
                    )
            return expired

    def release(self, worker: str, audit_ids: Sequence[int]) -> None:
        """A stopping worker hands its running audits back to the queue."""
        with self._session.begin() as s:
            now = utcnow()
            for audit_id in audit_ids:
                done = s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.worker == worker)
                    .values(status="pending", worker=None, lease_until=None)
                )
                if _count(done) == 1:
                    s.add(EventRow(audit_id=audit_id, at=now, kind="requeued", actor=worker, detail="worker stopped"))

    def finish(self, audit_id: int, worker: str, report: Report) -> bool:
        """Store the report, as produced, if `worker` still holds the audit; False when it does not (discarded)."""
        report_json = report.model_dump_json()
        data = json.loads(report_json)
        with self._session.begin() as s:
            now = utcnow()
            stored = s.execute(
                update(AuditRow)
                .where(
                    AuditRow.id == audit_id,
                    AuditRow.status == "running",
                    AuditRow.worker == worker,
                    AuditRow.report_json.is_(None),
                )
                .values(
                    status="done",
                    finished_at=now,
                    lease_until=None,
                    error=None,
                    verdict=report.verdict,
                    report_json=report_json,
                    llm_calls=report.usage.llm_calls,
                    prompt_tokens=report.usage.prompt_tokens,
                    completion_tokens=report.usage.completion_tokens,
                )
            )
            if _count(stored) != 1:
                s.add(
                    EventRow(
                        audit_id=audit_id,
                        at=now,
                        kind="discarded",
                        actor=worker,
                        detail="the result came after the audit was cancelled or taken over",
                    )
                )
                return False
            for position, claim in enumerate(data["claims"]):
                s.add(
                    ClaimRow(
                        audit_id=audit_id,
                        claim_id=claim["claim_id"],
                        position=position,
                        text=claim["text"],
                        engine_label=engine_label(claim),
                        decided_by=claim.get("decided_by") or "debate",
                        error_severity=claim.get("error_severity"),
                    )
                )
            s.add(EventRow(audit_id=audit_id, at=now, kind="finished", actor=worker, detail=report.verdict))
            return True

    def defer(
        self, audit_id: int, worker: str, reason: str, *, delay_s: float, max_attempts: int, keep_attempt: bool = False
    ) -> str:
        """A transient failure: back to the queue after `delay_s`, or failed after `max_attempts`. The new status.
        `keep_attempt`: the failure was not the audit's (the endpoint is known to be down), so this attempt is not
        counted."""
        with self._session.begin() as s:
            now = utcnow()
            row = s.get(AuditRow, audit_id)
            if row is None or row.status != "running" or row.worker != worker:
                return row.status if row is not None else "missing"
            if keep_attempt:
                row.attempts -= 1
            if not keep_attempt and row.attempts >= max_attempts:
                row.status, row.error, row.finished_at = (
                    "failed",
                    f"gave up after {row.attempts} attempts: {reason}",
                    now,
                )
                row.worker = row.lease_until = None
                s.add(EventRow(audit_id=audit_id, at=now, kind="failed", actor=worker, detail=row.error))
            else:
                row.status, row.worker, row.lease_until, row.error = "pending", None, None, reason
                row.not_before = now + timedelta(seconds=delay_s)
                s.add(EventRow(audit_id=audit_id, at=now, kind="deferred", actor=worker, detail=reason))
            return row.status

    def fail(self, audit_id: int, worker: str, message: str) -> bool:
        """A permanent failure (the item itself is unusable): recorded as the audit's outcome."""
        with self._session.begin() as s:
            now = utcnow()
            done = s.execute(
                update(AuditRow)
                .where(AuditRow.id == audit_id, AuditRow.status == "running", AuditRow.worker == worker)
                .values(status="failed", error=message, finished_at=now, lease_until=None)
            )
            if _count(done) == 1:
                s.add(EventRow(audit_id=audit_id, at=now, kind="failed", actor=worker, detail=message))
            return _count(done) == 1

    def cancel(self, audit_id: int, principal: Principal) -> str:
        """Cancel a pending or running audit; its status afterwards."""
        with self._session.begin() as s:
            row = s.get(AuditRow, audit_id)
            if row is None:
                raise NotFoundError(f"no audit {audit_id}")
            if row.status in ("pending", "running"):
                row.status, row.worker, row.lease_until, row.finished_at = "cancelled", None, None, utcnow()
                s.add(EventRow(audit_id=audit_id, at=utcnow(), kind="cancelled", actor=principal.name, detail=None))
            return row.status

    def retry(self, audit_id: int, principal: Principal) -> str:
        """Bring a failed audit back to the queue with its attempts reset (after an outage, or a fixed endpoint);
        its status afterwards. Only a failed audit can be retried (ConflictError otherwise)."""
        with self._session.begin() as s:
            row = s.get(AuditRow, audit_id)
            if row is None:
                raise NotFoundError(f"no audit {audit_id}")
            if row.status != "failed":
                raise ConflictError(f"audit {audit_id} is {row.status}; only a failed audit can be retried")
            self._requeue_failed(s, row, principal.name)
            return row.status

    def retry_failed(self, principal: Principal, *, batch_id: int | None = None) -> int:
        """Bring every failed audit (of one batch, or all) back to the queue; how many."""
        if batch_id is not None:
            self.batch(batch_id)
        with self._session.begin() as s:
            query = select(AuditRow).where(AuditRow.status == "failed")
            if batch_id is not None:
                query = query.where(AuditRow.batch_id == batch_id)
            rows = list(s.scalars(query))
            for row in rows:
                self._requeue_failed(s, row, principal.name)
            return len(rows)

    @staticmethod
    def _requeue_failed(s: Session, row: AuditRow, actor: str) -> None:
        now = utcnow()
        detail = f"retried after: {row.error}" if row.error else "retried"
        row.status, row.attempts, row.not_before, row.finished_at, row.error = "pending", 0, None, None, None
        s.add(EventRow(audit_id=row.id, at=now, kind="requeued", actor=actor, detail=detail))

    def cancel_batch(self, batch_id: int, principal: Principal) -> int:
        """Cancel a batch's unfinished audits; how many."""
        self.batch(batch_id)
        with self._session.begin() as s:
            ids = list(
                s.scalars(
                    select(AuditRow.id).where(
                        AuditRow.batch_id == batch_id, AuditRow.status.in_(("pending", "running"))
                    )
                )
            )
            now = utcnow()
            for audit_id in ids:
                s.execute(
                    update(AuditRow)
                    .where(AuditRow.id == audit_id, AuditRow.status.in_(("pending", "running")))
                    .values(status="cancelled", worker=None, lease_until=None, finished_at=now)
                )
                s.add(
                    EventRow(
                        audit_id=audit_id, at=now, kind="cancelled", actor=principal.name, detail=f"batch {batch_id}"
                    )
                )
            return len(ids)

    # --- reading ---------------------------------------------------------------------------------------------

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self._prices[0] + completion_tokens * self._prices[1]) / 1e6

    def _summary(self, row: AuditRow, claims: int, reviewed: int) -> dict[str, Any]:
        request = json.loads(row.request_json)
        response = request["response"]
        return {
            "id": row.id,
            "status": row.status,
            "task": row.task,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
            "submitted_by": row.submitted_by,
            "batch_id": row.batch_id,
            "verdict": row.verdict,
            "question": request.get("question"),
            "response_excerpt": response if len(response) <= 160 else response[:157] + "...",
            "claims": claims,
            "reviewed_claims": reviewed,
            "llm_calls": row.llm_calls,
            "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens,
            "cost": self._cost(row.prompt_tokens, row.completion_tokens),
            "error": row.error,
        }

    def _claim_counts(self, s: Session, ids: Sequence[int]) -> tuple[Counter[int], Counter[int]]:
        claims: Counter[int] = Counter()
        reviewed: Counter[int] = Counter()
        if ids:
            for audit_id, n in s.execute(
                select(ClaimRow.audit_id, func.count()).where(ClaimRow.audit_id.in_(ids)).group_by(ClaimRow.audit_id)
            ):
                claims[audit_id] = n
            for audit_id, n in s.execute(
                select(ReviewRow.audit_id, func.count(func.distinct(ReviewRow.claim_id)))
                .where(ReviewRow.audit_id.in_(ids))
                .group_by(ReviewRow.audit_id)
            ):
                reviewed[audit_id] = n
        return claims, reviewed

    def audit(self, audit_id: int) -> AuditDetail:
        with self._session() as s:
            row = s.get(AuditRow, audit_id)
            if row is None:
                raise NotFoundError(f"no audit {audit_id}")
            claims, reviewed = self._claim_counts(s, [audit_id])
            reviews = [
                _review_info(r)
                for r in s.scalars(select(ReviewRow).where(ReviewRow.audit_id == audit_id).order_by(ReviewRow.id))
            ]
            events = [
                EventInfo(at=e.at, kind=e.kind, actor=e.actor, detail=e.detail)
                for e in s.scalars(select(EventRow).where(EventRow.audit_id == audit_id).order_by(EventRow.id))
            ]
            return AuditDetail(
                **self._summary(row, claims[audit_id], reviewed[audit_id]),
                request=_shown_request(row.request_json),
                report=Report.model_validate_json(row.report_json) if row.report_json else None,
                attempts=row.attempts,
                reviews=reviews,
                events=events,
            )

    def report_json(self, audit_id: int) -> str | None:
        """The report exactly as stored."""
        with self._session() as s:
            row = s.get(AuditRow, audit_id)
            if row is None:
                raise NotFoundError(f"no audit {audit_id}")
            return row.report_json

    def status(self, audit_id: int) -> str:
        with self._session() as s:
            value = s.scalar(select(AuditRow.status).where(AuditRow.id == audit_id))
            if value is None:
                raise NotFoundError(f"no audit {audit_id}")
            return value

    def audits(
        self,
        *,
        verdict: str | None = None,
        task: str | None = None,
        status: str | None = None,
        reviewed: bool | None = None,
        q: str | None = None,
        since: datetime | None = None,
        batch_id: int | None = None,
        page: int = 1,
        per_page: int = 50,
    ) -> AuditPage:
        """Audits, newest first, filtered."""
        conditions = []
        if verdict:
            conditions.append(AuditRow.verdict == verdict)
        if task:
            conditions.append(AuditRow.task == task)
        if status:
            conditions.append(AuditRow.status == status)
        if since is not None:
            conditions.append(
                AuditRow.created_at >= since.astimezone(UTC).replace(tzinfo=None)
                if since.tzinfo
                else AuditRow.created_at >= since
            )
        if q:
            conditions.append(AuditRow.search_text.contains(q.lower(), autoescape=True))
        if batch_id is not None:
            conditions.append(AuditRow.batch_id == batch_id)
        if reviewed is not None:
            has_review = exists().where(ReviewRow.audit_id == AuditRow.id)
            conditions.append(has_review if reviewed else ~has_review)
        where = and_(*conditions) if conditions else None
        with self._session() as s:
            base = select(AuditRow)
            counted = select(func.count()).select_from(AuditRow)
            if where is not None:
                base, counted = base.where(where), counted.where(where)
            total = s.scalar(counted) or 0
            rows = list(s.scalars(base.order_by(AuditRow.id.desc()).offset((page - 1) * per_page).limit(per_page)))
            claims, reviewed_counts = self._claim_counts(s, [r.id for r in rows])
            items = [AuditSummary(**self._summary(r, claims[r.id], reviewed_counts[r.id])) for r in rows]
        return AuditPage(items=items, total=total, page=page, per_page=per_page)

    def batch(self, batch_id: int) -> BatchInfo:
        with self._session() as s:
            row = s.get(BatchRow, batch_id)
            if row is None:
                raise NotFoundError(f"no batch {batch_id}")
            counts = {
                status: n
                for status, n in s.execute(
                    select(AuditRow.status, func.count()).where(AuditRow.batch_id == batch_id).group_by(AuditRow.status)
                )
            }
            return BatchInfo(
                id=row.id,
                created_at=row.created_at,
                submitted_by=row.submitted_by,
                name=row.name,
                task=row.task,
                total=row.total,
                counts=counts,
                input_errors=row.input_errors,
                done=not counts.get("pending") and not counts.get("running"),
            )

    def batches(self, limit: int = 50) -> list[BatchInfo]:
        with self._session() as s:
            ids = list(s.scalars(select(BatchRow.id).order_by(BatchRow.id.desc()).limit(limit)))
        return [self.batch(i) for i in ids]

    # --- reviews ---------------------------------------------------------------------------------------------

    def add_review(self, audit_id: int, claim_id: str, principal: Principal, review: ReviewIn) -> ReviewInfo:
        """Record a review of a finished audit's claim (appended; the report is untouched)."""
        with self._session.begin() as s:
            claim = s.get(ClaimRow, (audit_id, claim_id))
            if claim is None:
                if s.get(AuditRow, audit_id) is None:
                    raise NotFoundError(f"no audit {audit_id}")
                raise NotFoundError(f"audit {audit_id} has no claim {claim_id!r} (or is not finished)")
            engine = claim.engine_label
            if review.decision == "confirm":
                if engine == "unverifiable":
                    raise StoreError("the engine gave no label (unverifiable): overturn it with the right label")
                if review.label is not None and review.label != engine:
                    raise StoreError(f"confirm keeps the engine's label {engine}; to change it, overturn")
                label = engine
            else:
                if review.label is None:
                    raise StoreError("overturn needs the right label")
                if review.label == engine:
                    raise StoreError(f"the engine already said {engine}: confirm instead")
                label = review.label
            row = ReviewRow(
                audit_id=audit_id,
                claim_id=claim_id,
                reviewer=principal.name,
                created_at=utcnow(),
                decision=review.decision,
                label=label,
                engine_label=engine,
                decided_by=claim.decided_by,
                note=review.note,
            )
            s.add(row)
            s.flush()
            s.add(
                EventRow(
                    audit_id=audit_id,
                    at=row.created_at,
                    kind="reviewed",
                    actor=principal.name,
                    detail=f"{claim_id}: {review.decision} ({engine} -> {label})",
                )
            )
            return _review_info(row)

    def review_queue(self, *, limit: int = 50, sample_rate: float = 0.1, seed: int = 0) -> list[QueueItem]:
        """Unreviewed claims: those the engine did not find factual first (oldest audit first), then a seeded
        sample of its confident factual decisions (prefilter decisions included) for re-checking."""
        reviewed = exists().where(ReviewRow.audit_id == ClaimRow.audit_id, ReviewRow.claim_id == ClaimRow.claim_id)
        with self._session() as s:
            rows = s.execute(
                select(ClaimRow, AuditRow.task)
                .join(AuditRow, AuditRow.id == ClaimRow.audit_id)
                .where(AuditRow.status == "done", ~reviewed)
                .order_by(ClaimRow.audit_id, ClaimRow.position)
            ).all()
        needs = [(c, t) for c, t in rows if c.engine_label != "factual"]
        spot = [(c, t) for c, t in rows if c.engine_label == "factual" and _sampled(seed, c, sample_rate)]
        items = [_queue_item(c, t, "needs-review") for c, t in needs] + [
            _queue_item(c, t, "spot-check") for c, t in spot
        ]
        return self._with_context(items[:limit])

    def _with_context(self, items: list[QueueItem]) -> list[QueueItem]:
        """Each item with its claim's evidence and deciding opinion, read from the stored reports, so a review
        needs no second page."""
        ids = {item.audit_id for item in items}
        with self._session() as s:
            stored = dict(s.execute(select(AuditRow.id, AuditRow.report_json).where(AuditRow.id.in_(ids))).all())
        reports = {audit_id: Report.model_validate_json(text) for audit_id, text in stored.items() if text}
        out = []
        for item in items:
            report = reports.get(item.audit_id)
            claim = next((c for c in report.claims if c.claim_id == item.claim_id), None) if report else None
            if claim is None:
                out.append(item)
                continue
            opinion = claim.debate.final.opinion if claim.debate is not None and claim.debate.final else claim.reason
            out.append(item.model_copy(update={"evidence": claim.evidence, "final_opinion": opinion}))
        return out

    # --- stats and export ------------------------------------------------------------------------------------

    def stats(self, *, bucket: Literal["day", "week"] = "day") -> Stats:
        from sklearn.metrics import cohen_kappa_score  # scikit-learn costs ~1 s to import: only the stats need it

        with self._session() as s:
            by_status = dict(s.execute(select(AuditRow.status, func.count()).group_by(AuditRow.status)).all())
            by_verdict = dict(
                s.execute(
                    select(AuditRow.verdict, func.count()).where(AuditRow.status == "done").group_by(AuditRow.verdict)
                ).all()
            )
            by_task = dict(s.execute(select(AuditRow.task, func.count()).group_by(AuditRow.task)).all())
            calls, prompt, completion = s.execute(
                select(
                    func.coalesce(func.sum(AuditRow.llm_calls), 0),
                    func.coalesce(func.sum(AuditRow.prompt_tokens), 0),
                    func.coalesce(func.sum(AuditRow.completion_tokens), 0),
                )
            ).one()
            reviews = list(
                s.execute(
                    select(
                        ReviewRow.created_at,
                        ReviewRow.engine_label,
                        ReviewRow.label,
                        ReviewRow.audit_id,
                        ReviewRow.claim_id,
                    ).order_by(ReviewRow.id)
                )
            )

        def kappa(pairs: list[tuple[str, str]]) -> float | None:
            engine, human = [p[0] for p in pairs], [p[1] for p in pairs]
            if len(set(engine) | set(human)) < 2:
                return None  # one category only: kappa is undefined
            value = float(cohen_kappa_score(engine, human, labels=_LABELS))
            return None if value != value else value

        periods: dict[str, list[tuple[str, str]]] = {}
        for created, engine, label, _, _ in reviews:
            day = created.date()
            key = day.isoformat() if bucket == "day" else f"{day.isocalendar().year}-W{day.isocalendar().week:02d}"
            periods.setdefault(key, []).append((engine, label))
        pairs = [(engine, label) for _, engine, label, _, _ in reviews]
        return Stats(
            by_status=by_status,
            by_verdict={str(k): v for k, v in by_verdict.items()},
            by_task=by_task,
            reviews=len(reviews),
            reviewed_claims=len({(a, c) for *_, a, c in reviews}),
            agreement=sum(e == h for e, h in pairs) / len(pairs) if pairs else None,
            kappa=kappa(pairs) if pairs else None,
            over_time=[
                AgreementPoint(period=k, reviews=len(v), agreement=sum(e == h for e, h in v) / len(v), kappa=kappa(v))
                for k, v in sorted(periods.items())
            ],
            llm_calls=int(calls),
            prompt_tokens=int(prompt),
            completion_tokens=int(completion),
            cost=self._cost(int(prompt), int(completion)),
        )

    def export_rows(self) -> Iterator[tuple[AuditRow, list[ReviewRow]]]:
        """Finished audits in id order, with their reviews (streamed in pages)."""
        last = 0
        while True:
            with self._session() as s:
                rows = list(
                    s.scalars(
                        select(AuditRow)
                        .where(AuditRow.status == "done", AuditRow.id > last)
                        .order_by(AuditRow.id)
                        .limit(200)
                    )
                )
                if not rows:
                    return
                reviews: dict[int, list[ReviewRow]] = {}
                for review in s.scalars(
                    select(ReviewRow).where(ReviewRow.audit_id.in_([r.id for r in rows])).order_by(ReviewRow.id)
                ):
                    reviews.setdefault(review.audit_id, []).append(review)
            for row in rows:
                yield row, reviews.get(row.id, [])
            last = rows[-1].id

    # --- helpers ---------------------------------------------------------------------------------------------


def _review_info(row: ReviewRow) -> ReviewInfo:
    return ReviewInfo(
        id=row.id,
        audit_id=row.audit_id,
        claim_id=row.claim_id,
        reviewer=row.reviewer,
        created_at=row.created_at,
        decision=row.decision,
        label=row.label,
        engine_label=row.engine_label,
        decided_by=row.decided_by,
        note=row.note,
    )


def _queue_item(claim: ClaimRow, task: str, reason: Literal["needs-review", "spot-check"]) -> QueueItem:
    return QueueItem(
        audit_id=claim.audit_id,
        claim_id=claim.claim_id,
        reason=reason,
        text=claim.text,
        engine_label=claim.engine_label,
        decided_by=claim.decided_by,
        error_severity=claim.error_severity,
        task=task,
    )


def _shown_request(text: str) -> AuditRequest:
    """A stored request for reading: as the worker loads it, or, for one it refused (an older server stored what
    the worker cannot load), from Python's own JSON reader, so the audit and its failure can still be shown."""
    try:
        return load_request(text)
    except ValidationError:
        return AuditRequest.model_validate(json.loads(text))


def _sampled(seed: int, claim: ClaimRow, rate: float) -> bool:
    # Each claim's draw depends only on (seed, audit, claim): the sample does not shift as new audits arrive.
    return random.Random(f"{seed}:{claim.audit_id}:{claim.claim_id}").random() < rate


def _revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def _sqlite_setup(engine: Engine) -> None:
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
        conn.exec_driver_sql("BEGIN IMMEDIATE")
