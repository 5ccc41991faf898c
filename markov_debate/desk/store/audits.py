"""Submitting audits and batches, reading them back (one, a filtered page, a batch), and the rows an export pages
through."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import and_, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from debate.types import Report
from markov_debate.desk.auth import Principal
from markov_debate.desk.models import (
    AuditDetail,
    AuditPage,
    AuditSummary,
    BatchInfo,
    EventInfo,
    ReviewInfo,
)
from markov_debate.desk.requests import AuditRequest, load_request
from markov_debate.desk.store.db import CancelledReplayError, ConflictError, NotFoundError, sha, utcnow
from markov_debate.desk.store.filters import AuditFilters
from markov_debate.desk.store.pending import hold_pending
from markov_debate.desk.store.reporting import ReportingStore
from markov_debate.desk.store.visibility import WORKER_KINDS, hidden_in_report, hidden_in_text
from markov_debate.desk.tables import AuditRow, BatchRow, ClaimRow, EventRow, ReviewRow

__all__ = ["AuditStore", "review_info"]


class AuditStore(ReportingStore):
    """Submissions and reads."""

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
        max_pending: int | None = None,
    ) -> tuple[int, bool]:
        """Queue one audit; (id, created). The same idempotency key with the same body returns the first audit,
        also when two such requests race (the database's unique index decides; the loser reads the winner's).
        With `max_pending`, PendingLimitError when the key already has that many waiting or running."""
        args = (principal, request, idempotency_key, batch_id, batch_line, session, max_pending)
        try:
            return self._insert(*args)
        except IntegrityError:
            if idempotency_key is None or session is not None:
                raise
            # another request with this key committed first: this look finds its audit
            return self._insert(*args)

    def _insert(
        self,
        principal: Principal,
        request: AuditRequest,
        idempotency_key: str | None,
        batch_id: int | None,
        batch_line: int | None,
        session: Session | None,
        max_pending: int | None,
    ) -> tuple[int, bool]:
        body = request.model_dump_json()
        digest = sha(body)
        with nullcontext(session) if session is not None else self._session.begin() as s:
            replayed = None if idempotency_key is None else self._replayed(s, principal, idempotency_key, digest)
            if replayed is not None:
                return replayed, False
            if max_pending is not None:
                hold_pending(s, self.dialect, principal.name, 1, max_pending)
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

    def _replayed(self, s: Session, principal: Principal, key: str, digest: str) -> int | None:
        """The audit this principal already sent with this Idempotency-Key, if any (None: a new one)."""
        found = s.scalars(
            select(AuditRow).where(AuditRow.submitted_by == principal.name, AuditRow.idempotency_key == key)
        ).first()
        if found is None:
            return None
        if found.request_sha256 != digest:
            raise ConflictError(f"idempotency key {key!r} was used for a different request (audit {found.id})")
        if found.status == "failed":
            # Sending it again is asking for it to be done: the same audit goes back to the queue.
            self._requeue_failed(s, found, principal.name)
        if found.status == "cancelled":
            # Someone stopped it on purpose: a replay must not quietly return it as if it were running.
            raise CancelledReplayError(
                f"idempotency key {key!r} belongs to audit {found.id}, which was cancelled; "
                f"POST /v1/audits/{found.id}/retry runs it again, or send a new key",
                audit_id=found.id,
            )
        return found.id

    def submit_batch(
        self,
        principal: Principal,
        *,
        name: str,
        task: str,
        items: Sequence[tuple[int, AuditRequest]],
        input_errors: list[dict[str, Any]],
        idempotency_key: str | None = None,
        digest: str | None = None,
        max_pending: int | None = None,
    ) -> tuple[int, bool]:
        """Queue a batch in one transaction: all its readable lines, or nothing; (id, created). An upload sent
        again with the same Idempotency-Key (and the same bytes) returns the first batch and queues nothing. With
        `max_pending`, the whole batch or nothing fits under the key's cap (PendingLimitError)."""
        try:
            with self._session.begin() as s:
                if max_pending is not None:
                    hold_pending(s, self.dialect, principal.name, len(items), max_pending)
                batch = BatchRow(
                    created_at=utcnow(),
                    submitted_by=principal.name,
                    name=name,
                    task=task,
                    total=len(items),
                    input_errors=input_errors,
                    idempotency_key=idempotency_key,
                    request_sha256=digest,
                )
                s.add(batch)
                s.flush()
                for line, request in items:
                    self.submit(principal, request, batch_id=batch.id, batch_line=line, session=s)
                return batch.id, True
        except IntegrityError:
            # Another request with the same key got there first (a client retrying before its first try returned).
            if idempotency_key is None or digest is None:
                raise
            replayed = self.replayed_batch(principal, idempotency_key, digest)
            if replayed is None:
                raise
            return replayed, False

    def replayed_batch(self, principal: Principal, key: str, digest: str) -> int | None:
        """The batch this principal already uploaded with this Idempotency-Key (None: a new upload); 409 when the
        key came with other bytes."""
        with self._read() as s:
            found = s.scalars(
                select(BatchRow).where(BatchRow.submitted_by == principal.name, BatchRow.idempotency_key == key)
            ).first()
            if found is None:
                return None
            if found.request_sha256 != digest:
                raise ConflictError(f"idempotency key {key!r} was used for a different upload (batch {found.id})")
            return found.id

    def pending_count(self, submitted_by: str) -> int:
        """Audits this key has waiting or running (the per-key quota)."""
        with self._read() as s:
            query = select(func.count()).where(
                AuditRow.submitted_by == submitted_by, AuditRow.status.in_(("pending", "running"))
            )
            return int(s.scalar(query) or 0)

    # --- reading ---------------------------------------------------------------------------------------------

    def _summary(self, row: AuditRow, claims: int, reviewed: int, *, hide: bool = False) -> dict[str, Any]:
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
            "reviewed_verdict": row.reviewed_verdict,
            "question": request.get("question"),
            "response_excerpt": response if len(response) <= 160 else response[:157] + "...",
            "claims": claims,
            "reviewed_claims": reviewed,
            "llm_calls": row.llm_calls,
            "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens,
            "cost": row.cost_usd if row.cost_usd is not None else self._cost(row.prompt_tokens, row.completion_tokens),
            "cost_per_model": row.cost_usd is not None,
            "error": hidden_in_text(row.error) if hide else row.error,
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

    def audit(self, audit_id: int, *, owner: str | None = None) -> AuditDetail:
        """One audit; `owner`: only if that principal submitted it (another's is "no audit", as if absent)."""
        with self._read() as s:
            row = owned(s.get(AuditRow, audit_id), audit_id, owner)
            claims, reviewed = self._claim_counts(s, [audit_id])
            reviews = [
                review_info(r)
                for r in s.scalars(select(ReviewRow).where(ReviewRow.audit_id == audit_id).order_by(ReviewRow.id))
            ]
            hide = owner is not None  # a submitter: no worker names, no endpoint address (store.visibility)
            events = [
                EventInfo(
                    at=e.at,
                    kind=e.kind,
                    actor="worker" if hide and e.kind in WORKER_KINDS else e.actor,
                    detail=hidden_in_text(e.detail) if hide else e.detail,
                )
                for e in s.scalars(select(EventRow).where(EventRow.audit_id == audit_id).order_by(EventRow.id))
            ]
            report_json = hidden_in_report(row.report_json) if row.report_json and hide else row.report_json
            return AuditDetail(
                **self._summary(row, claims[audit_id], reviewed[audit_id], hide=hide),
                request=_shown_request(row.request_json),
                report=Report.model_validate_json(report_json) if report_json else None,
                attempts=row.attempts,
                reviews=reviews,
                events=events,
            )

    def report_json(self, audit_id: int, *, owner: str | None = None) -> str | None:
        """The report exactly as stored; for a submitter (`owner`), without the endpoint's address."""
        with self._read() as s:
            stored = owned(s.get(AuditRow, audit_id), audit_id, owner).report_json
        return hidden_in_report(stored) if stored and owner is not None else stored

    def status(self, audit_id: int, *, owner: str | None = None) -> str:
        with self._read() as s:
            return owned(s.get(AuditRow, audit_id), audit_id, owner).status

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
        owner: str | None = None,
        guard_action: str | None = None,
        page: int = 1,
        per_page: int = 50,
        before: int | None = None,
    ) -> AuditPage:
        """Audits, newest first, filtered (see AuditFilters); `before`: those older than that audit id (the next
        page of a listing, read by the index), else `page`."""
        conditions = AuditFilters(
            verdict=verdict,
            task=task,
            status=status,
            reviewed=reviewed,
            q=q,
            since=since,
            batch_id=batch_id,
            owner=owner,
            guard_action=guard_action,
        ).conditions()
        where = and_(*conditions) if conditions else None
        with self._read() as s:
            base = select(AuditRow)
            counted = select(func.count()).select_from(AuditRow)
            if where is not None:
                base, counted = base.where(where), counted.where(where)
            total = s.scalar(counted) or 0
            if before is not None:
                base, page = base.where(AuditRow.id < before), 1
            ordered = base.order_by(AuditRow.id.desc())
            rows = list(s.scalars(ordered.offset((page - 1) * per_page if before is None else 0).limit(per_page + 1)))
            more, rows = len(rows) > per_page, rows[:per_page]
            claims, reviewed_counts = self._claim_counts(s, [r.id for r in rows])
            hide = owner is not None
            items = [AuditSummary(**self._summary(r, claims[r.id], reviewed_counts[r.id], hide=hide)) for r in rows]
        next_before = rows[-1].id if more and rows else None
        return AuditPage(items=items, total=total, page=page, per_page=per_page, next_before=next_before)

    def batch(self, batch_id: int, *, owner: str | None = None) -> BatchInfo:
        with self._read() as s:
            row = s.get(BatchRow, batch_id)
            if row is None or (owner is not None and row.submitted_by != owner):
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

    def batches(self, limit: int = 50, *, owner: str | None = None) -> list[BatchInfo]:
        with self._read() as s:
            query = select(BatchRow.id).order_by(BatchRow.id.desc()).limit(limit)
            if owner is not None:
                query = query.where(BatchRow.submitted_by == owner)
            ids = list(s.scalars(query))
        return [self.batch(i) for i in ids]

    @staticmethod
    def _requeue_failed(s: Session, row: AuditRow, actor: str) -> None:
        """A failed or cancelled audit back to the queue with its attempts reset (retry, or a failed one's request
        sent again)."""
        now = utcnow()
        detail = f"retried after: {row.error}" if row.error else f"retried after it was {row.status}"
        row.status, row.attempts, row.not_before, row.finished_at, row.error = "pending", 0, None, None, None
        s.add(EventRow(audit_id=row.id, at=now, kind="requeued", actor=actor, detail=detail))


def _shown_request(text: str) -> AuditRequest:
    """A stored request for reading: as the worker loads it, or, for one it refused (an older server stored what
    the worker cannot load), from Python's own JSON reader, so the audit and its failure can still be shown."""
    try:
        return load_request(text)
    except ValidationError:
        return AuditRequest.model_validate(json.loads(text))


def owned(row: AuditRow | None, audit_id: int, owner: str | None) -> AuditRow:
    """The row, if it exists and `owner` (when given) submitted it. Another's audit reads as absent, so a
    submitter learns nothing of others' work, not even that an id is taken."""
    if row is None or (owner is not None and row.submitted_by != owner):
        raise NotFoundError(f"no audit {audit_id}")
    return row


def review_info(row: ReviewRow) -> ReviewInfo:
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
