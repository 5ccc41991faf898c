"""The guard's decisions (`debate guard`): each answer it checked becomes an audit, finished with its report when the
debate ran in the request path, else pending for a worker's debate, with a guard_decisions row beside it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from debate.types import Report
from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.store.audits import AuditStore
from markov_debate.desk.store.db import sha
from markov_debate.desk.store.jobs import claim_values
from markov_debate.desk.tables import AuditRow, ClaimRow, EventRow, GuardDecisionRow

__all__ = ["GuardRecord", "GuardRows", "GuardStore", "storable", "storable_json"]

_JSON_COLUMNS = frozenset({"request_json", "report_json", "verification_json"})


@dataclass(frozen=True)
class GuardRecord:
    """One decision of the guard, as the store keeps it."""

    request: AuditRequest
    """The answer, its question and sources, as an audit of task rag (or general without sources)."""
    request_id: str
    caller: str
    at: datetime
    route: str | None
    policy: str
    action: str
    status: str
    risk: str | None
    verification_json: str
    report: Report | None
    """The report the decision was made on."""
    finished: bool
    """Whether that report is the audit's result (every claim was decided or failed for good in the request path);
    otherwise the audit waits for a worker's debate."""


class GuardStore(AuditStore):
    """Recording the guard's decisions."""

    def record_guarded(self, records: Sequence[GuardRecord]) -> int:
        """Store `records` in one transaction (see `record_rows`); the number newly stored."""
        return self.record_rows([GuardRows.of(r) for r in records])

    def record_rows(self, rows: Sequence[GuardRows]) -> int:
        """Store decisions made into rows in one transaction (a request id already stored is skipped, so a retried
        batch stores each decision once); the number newly stored."""
        try:
            with self._session.begin() as s:
                return _add_guarded(s, rows)
        except IntegrityError:
            # Two guards raced on a request id (or a batch was partly stored before a lost reply): one at a time.
            stored = 0
            for one in rows:
                try:
                    with self._session.begin() as s:
                        stored += _add_guarded(s, [one])
                except IntegrityError:
                    continue
            return stored

    def guard_decision(self, request_id: str) -> tuple[int, str, str] | None:
        """The audit id, action and verification (JSON) kept for `request_id`, or None."""
        with self._session() as s:
            row = s.scalars(select(GuardDecisionRow).where(GuardDecisionRow.request_id == request_id)).first()
            return None if row is None else (row.audit_id, row.action, row.verification_json)


def _add_guarded(s: Session, rows: Sequence[GuardRows]) -> int:
    """Insert the decisions not stored yet: a few multi-row INSERTs per batch rather than a flush per object."""
    decided = _table(GuardDecisionRow)
    ids = [r.decision["request_id"] for r in rows]
    seen = set(s.scalars(select(decided.c.request_id).where(decided.c.request_id.in_(ids))))
    fresh: list[GuardRows] = []
    for one in rows:
        if one.decision["request_id"] not in seen:
            seen.add(one.decision["request_id"])
            fresh.append(one)
    if not fresh:
        return 0
    audits = _table(AuditRow)
    audit_ids = list(
        s.scalars(insert(audits).returning(audits.c.id, sort_by_parameter_order=True), [m.audit for m in fresh])
    )
    events: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    for audit_id, m in zip(audit_ids, fresh, strict=True):
        d = m.decision
        detail = f"guard request {d['request_id']}: {d['action']} under policy {d['policy']}"
        events.append(
            {"audit_id": audit_id, "at": d["at"], "kind": "submitted", "actor": d["caller"], "detail": detail}
        )
        if m.audit["report_json"] is not None:  # the request path finished the audit
            claims.extend(claim_values(audit_id, json.loads(m.audit["report_json"])))
            verdict = m.audit["verdict"]
            events.append(
                {"audit_id": audit_id, "at": d["at"], "kind": "finished", "actor": "guard", "detail": verdict}
            )
        decisions.append({**d, "audit_id": audit_id})
    s.execute(insert(_table(EventRow)), events)
    if claims:
        s.execute(insert(_table(ClaimRow)), claims)
    s.execute(insert(decided), decisions)
    return len(fresh)


def _table(row: type[Any]) -> Table:
    """The row class's table: statements on it run in SQLAlchemy Core, without the ORM's bulk-insert layer (half
    of a batch's time, measured, for rows that are never loaded back as objects here)."""
    table: Table = row.__table__
    return table


_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
"""A JSON text's escaped NUL (backslash, u0000), not an escaped backslash before "u0000"."""
_REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """`text` as every store keeps it: a NUL (which PostgreSQL's text refuses) and a lone surrogate (no UTF-8 has
    one) each become U+FFFD. The guard's one rule for what it records: an answer is never refused for its text, and
    a decision is never lost to it (the desk refuses such a request instead, naming the field)."""
    if "\x00" in text:
        text = text.replace("\x00", _REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join(_REPLACEMENT if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def storable_json(text: str) -> str:
    """A JSON text with each escaped NUL made U+FFFD (PostgreSQL refuses it in JSON as in text)."""
    return _NUL_ESCAPE.sub(lambda m: m.group(1) + "\\ufffd", text) if "\\u0000" in text else text


def _storable(value: object) -> object:
    return storable(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class GuardRows:
    """One decision as column values: plain data, cheap to send to the process that writes it (the audit's id is
    known only once its row is in)."""

    audit: dict[str, Any]
    decision: dict[str, Any]

    @classmethod
    def of(cls, record: GuardRecord) -> GuardRows:
        """The record as column values every store takes (`storable`)."""
        body = storable_json(record.request.model_dump_json())
        report_json = storable_json(record.report.model_dump_json()) if record.report is not None else None
        report = record.report if record.finished else None
        usage = report.usage if report is not None else None
        audit = {
            "created_at": record.at,
            "submitted_by": record.caller,
            "idempotency_key": f"guard:{record.request_id}",
            "request_sha256": sha(body),
            "task": record.request.task,
            "request_json": body,
            "status": "done" if report is not None else "pending",
            "attempts": 0,
            "started_at": record.at if report is not None else None,
            "finished_at": record.at if report is not None else None,
            "verdict": report.verdict if report is not None else None,
            "report_json": report_json if report is not None else None,  # the audit's result, once finished
            "llm_calls": usage.llm_calls if usage else 0,
            "prompt_tokens": usage.prompt_tokens if usage else 0,
            "completion_tokens": usage.completion_tokens if usage else 0,
            "search_text": f"{record.request.question or ''}\n{record.request.response}".lower(),
        }
        decision = {
            "request_id": record.request_id,
            "at": record.at,
            "caller": record.caller,
            "route": record.route,
            "policy": record.policy,
            "action": record.action,
            "status": record.status,
            "risk": record.risk,
            "verification_json": record.verification_json,
            "report_json": report_json,
        }
        # the JSON texts are made storable above; every other text (the answer's words in search_text, the caller,
        # the route) here
        audit = {k: v if k in _JSON_COLUMNS else _storable(v) for k, v in audit.items()}
        decision = {k: v if k in _JSON_COLUMNS else _storable(v) for k, v in decision.items()}
        decision["verification_json"] = storable_json(record.verification_json)
        return cls(audit, decision)
