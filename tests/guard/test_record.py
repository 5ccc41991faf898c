"""Every decision on record: the writer thread keeps decisions while the store is away and writes them when it is
back, stores a batch once, and flushes what is queued on shutdown; on a real SQLite store, a retried batch is kept
once."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.store import GuardRecord, Store
from markov_debate.desk.tables import AuditRow, GuardDecisionRow
from markov_debate.guard.record import Recorder


def _record(n: int) -> GuardRecord:
    request = AuditRequest(task="rag", response=f"Answer {n} [a].", question="q", reference={"a": "text"})
    return GuardRecord(
        request=request,
        request_id=f"guard-{n}",
        caller="anonymous",
        at=datetime.now(UTC).replace(tzinfo=None),
        route=None,
        policy="annotate",
        action="annotated",
        status="unverified",
        risk=None,
        verification_json="{}",
        report=None,
        finished=False,
    )


class _FlakyStore:
    """Refuses writes until `up` is set, then keeps what it is given."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.kept: list[str] = []
        self.refused = 0

    def record_guarded(self, records: list[GuardRecord]) -> int:
        if not self.up.is_set():
            self.refused += 1
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        self.kept.extend(r.request_id for r in records)
        return len(records)


def test_decisions_wait_while_the_store_is_away_and_are_written_when_it_is_back() -> None:
    store = _FlakyStore()
    recorder = Recorder(store, max_pending=5)  # type: ignore[arg-type]
    recorder.start()
    for n in range(8):
        recorder.add(_record(n))
    deadline = time.monotonic() + 10
    while store.refused < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.refused >= 2 and recorder.failing_since is not None
    assert recorder.full is (recorder.pending >= 5)
    store.up.set()
    assert recorder.close(timeout_s=30) == 0
    assert sorted(store.kept) == sorted(f"guard-{n}" for n in range(8)) and recorder.failing_since is None


def test_a_retried_batch_is_stored_once(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'desk.sqlite'}")
    try:
        records = [_record(n) for n in range(3)]
        assert store.record_guarded(records) == 3
        assert store.record_guarded([*records, _record(3)]) == 1
        with store._session() as s:
            decisions = s.scalar(select(func.count()).select_from(GuardDecisionRow))
            audits = s.scalars(select(AuditRow.status)).all()
        assert decisions == 4 and audits == ["pending"] * 4
        assert store.guard_decision("guard-2") is not None and store.guard_decision("guard-9") is None
    finally:
        store.close()
