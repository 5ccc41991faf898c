"""Every decision on record: the writer keeps decisions while the store is away and writes them when it is back;
the writer process stores what the guard hands it, flushes on close, shrugs off the signals a Ctrl-C or a service
manager sends the whole process group, and is replaced when it dies; a retried batch is kept once."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import DataError, OperationalError

from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.store import GuardRows, Store
from markov_debate.desk.tables import AuditRow, GuardDecisionRow
from markov_debate.guard.record import Recorder
from markov_debate.guard.writer import Writer
from tests.support.desk import guard_record


class _FlakyStore:
    """Refuses writes until `up` is set, then keeps what it is given."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.kept: list[str] = []
        self.refused = 0

    def record_rows(self, rows: Sequence[GuardRows]) -> int:
        if not self.up.is_set():
            self.refused += 1
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        self.kept.extend(r.decision["request_id"] for r in rows)
        return len(rows)


def _until(condition: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_decisions_wait_while_the_store_is_away_and_are_written_when_it_is_back() -> None:
    store = _FlakyStore()
    tally = [0.0, 0.0, 0.0]
    rows: queue.Queue[GuardRows] = queue.Queue()
    done = threading.Event()
    writer = Writer(store, tally, ended=done.is_set, linger_s=0.01)
    thread = threading.Thread(target=writer.run, args=(rows.get,))
    thread.start()
    for n in range(8):
        rows.put(GuardRows.of(guard_record(n)))
    _until(lambda: store.refused >= 2)
    assert store.refused >= 2 and tally[0] == 0 and tally[2] > 0  # nothing stored; failing since a time
    store.up.set()
    _until(lambda: tally[0] == 8)
    done.set()
    thread.join(30)
    assert not thread.is_alive()
    assert sorted(store.kept) == sorted(f"guard-{n}" for n in range(8)) and tally == [8.0, 0.0, 0.0]


def _count(db_url: str) -> int:
    store = Store(db_url)
    try:
        with store._session() as s:
            return int(s.scalar(select(func.count()).select_from(GuardDecisionRow)) or 0)
    finally:
        store.close()


def _recorder(tmp_path: Path) -> tuple[Recorder, str]:
    db_url = f"sqlite:///{tmp_path / 'desk.sqlite'}"
    Store(db_url).close()
    return Recorder(db_url, linger_s=0.01), db_url


def _dead(pid: int) -> bool:
    """Whether `pid` has exited with every thread of it gone (WNOWAIT: left for the recorder to reap)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


async def _kill(pid: int) -> None:
    """SIGKILL, then wait until it is dead."""
    os.kill(pid, signal.SIGKILL)
    await _until_async(lambda: _dead(pid))


def test_the_writer_process_stores_what_it_is_handed_and_flushes_on_close(tmp_path: Path) -> None:
    recorder, db_url = _recorder(tmp_path)

    async def run() -> int:
        await recorder.start()
        for n in range(25):
            recorder.add(guard_record(n))
            if n % 10 == 0:
                await asyncio.sleep(0)  # several frames, not one
        assert recorder.pending + recorder.stored == 25
        return await recorder.close(timeout_s=60)

    assert asyncio.run(run()) == 0
    assert recorder.stored == 25 and recorder.pending == 0 and recorder.failing_since is None
    assert _count(db_url) == 25


async def _until_async(condition: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]  # noqa: ASYNC110
        await asyncio.sleep(0.01)


def test_the_writer_outlives_the_signals_of_a_stop_and_is_replaced_when_killed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder, db_url = _recorder(tmp_path)

    async def run() -> int:
        await recorder.start()
        try:
            recorder.add(guard_record(0))
            await _until_async(lambda: recorder.stored == 1)
            first = recorder.writer_pid
            assert first is not None
            # Ctrl-C and systemd's stop reach every process of the guard: the writer waits for the pipe to end.
            os.kill(first, signal.SIGINT)
            os.kill(first, signal.SIGTERM)
            recorder.add(guard_record(1))
            await _until_async(lambda: recorder.stored == 2)
            assert recorder.stored == 2 and recorder.writer_pid == first
            await _kill(first)
            with caplog.at_level(logging.ERROR, logger="markov_debate.guard"):
                recorder.add(guard_record(2))
                await _until_async(lambda: recorder.writer_pid != first)
                await _until_async(lambda: recorder.stored == 3)
            assert recorder.writer_pid != first
            assert "the decision writer stopped (exit code -9) holding 0 decision(s)" in caplog.text
        finally:
            left = await recorder.close(timeout_s=60)
        return left

    assert asyncio.run(run()) == 0
    assert recorder.stored == 3 and recorder.dropped == 0 and _count(db_url) == 3


def test_what_a_killed_writer_held_is_counted_as_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder, db_url = _recorder(tmp_path)

    async def run() -> int:
        await recorder.start()
        try:
            first = recorder.writer_pid
            assert first is not None
            os.kill(first, signal.SIGSTOP)  # it takes nothing more: what is sent now waits in the pipe
            for n in range(3):
                recorder.add(guard_record(n))
            await asyncio.sleep(0.1)
            assert recorder.pending == 3
            await _kill(first)
            with caplog.at_level(logging.ERROR, logger="markov_debate.guard"):
                recorder.add(guard_record(3))
                await _until_async(lambda: recorder.stored == 1)
            assert "holding 3 decision(s), lost" in caplog.text
        finally:
            left = await recorder.close(timeout_s=60)
        return left

    assert asyncio.run(run()) == 0
    assert recorder.dropped == 3 and recorder.stored == 1 and recorder.pending == 0 and _count(db_url) == 1


_UNCLOSED = """
import asyncio, sys
from tests.support.desk import guard_record
from markov_debate.guard.record import Recorder

KEPT = []

async def main():
    recorder = Recorder(sys.argv[1], linger_s=0.01)
    KEPT.append(recorder)  # still referenced at exit, as the app's state is
    await recorder.start()
    recorder.add(guard_record(0))
    while recorder.stored < 1:
        await asyncio.sleep(0.01)
    recorder.add(guard_record(1))
    await asyncio.sleep(0)

asyncio.run(main())
"""


def test_a_guard_that_exits_without_closing_its_recorder_still_exits(tmp_path: Path) -> None:
    _, db_url = _recorder(tmp_path)
    done = subprocess.run([sys.executable, "-c", _UNCLOSED, db_url], timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _count(db_url) == 2  # the writer stored what reached it, then left with the guard


_JSON_LOG = """
import asyncio, sys
from markov_debate.desk.logs import configure_server_logging
from markov_debate.guard.record import Recorder

configure_server_logging("json", verbose=False)  # as `debate guard --log-format json` does

async def main():
    recorder = Recorder(sys.argv[1])
    await recorder.start()
    while recorder.failing_since is None:  # the writer has said it cannot open the store
        await asyncio.sleep(0.05)
    await recorder.close(timeout_s=10)

asyncio.run(main())
"""


@pytest.mark.slow
def test_the_writer_process_logs_in_the_guard_s_format() -> None:
    """Issue 73: the decision writer (a process of its own) wrote rich console lines without timestamps, ignoring
    --log-format json, with the database's multi-line text. Its lines now read as the guard's: one JSON object a
    line, the store's cause on one line."""
    nowhere = "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2"
    done = subprocess.run([sys.executable, "-c", _JSON_LOG, nowhere], timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.strip().splitlines()]
    said = [r for r in records if "cannot be opened to write decisions" in r["message"]]
    assert said and all(set(r) == {"time", "level", "logger", "message"} for r in records), done.stderr
    assert said[0]["level"] == "ERROR" and "OperationalError" in said[0]["message"]


def test_a_retried_batch_is_stored_once(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'desk.sqlite'}")
    try:
        records = [guard_record(n) for n in range(3)]
        assert store.record_guarded(records) == 3
        assert store.record_guarded([*records, guard_record(3)]) == 1
        with store._session() as s:
            decisions = s.scalar(select(func.count()).select_from(GuardDecisionRow))
            audits = s.scalars(select(AuditRow.status)).all()
        assert decisions == 4 and audits == ["pending"] * 4
        assert store.guard_decision("guard-2") is not None and store.guard_decision("guard-9") is None
    finally:
        store.close()


def test_a_decision_that_cannot_be_written_is_dropped_and_named_and_the_rest_are_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder, db_url = _recorder(tmp_path)
    # A lone surrogate cannot be encoded as the audit's JSON; the guard's own reading never lets one through, so
    # the record is built by hand here.
    broken = AuditRequest.model_construct(task="rag", response="a\ud800", question=None, claims=None)
    unwritable = dataclasses.replace(guard_record(1), request=broken)

    async def run() -> int:
        await recorder.start()
        with caplog.at_level(logging.ERROR, logger="markov_debate.guard"):
            for record in (guard_record(0), unwritable, guard_record(2)):
                recorder.add(record)  # within one gather window: one frame for the three
            return await recorder.close(timeout_s=60)

    assert asyncio.run(run()) == 0
    assert recorder.stored == 2 and recorder.dropped == 1 and recorder.pending == 0 and _count(db_url) == 2
    assert "decision guard-1 cannot be stored, dropped" in caplog.text


def _kill_blocking(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    _until(lambda: _dead(pid))


def test_decisions_left_at_an_exit_after_the_writer_died_are_counted_as_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder, _ = _recorder(tmp_path)

    async def run() -> None:
        await recorder.start()
        pid = recorder.writer_pid
        assert pid is not None
        _kill_blocking(pid)  # without yielding to the loop: the guard's side has not yet seen the reader go
        recorder.add(guard_record(0))
        with caplog.at_level(logging.ERROR, logger="markov_debate.guard"):
            recorder._end_pipe()  # what the interpreter's exit runs when the guard never closed its recorder
        await recorder.close(timeout_s=10)

    asyncio.run(run())
    assert recorder.dropped == 1 and recorder.pending == 0
    assert "1 decision(s) lost at exit: the writer cannot take them" in caplog.text


class _PickyStore:
    """Keeps every row but those whose answer holds `bad`, which it refuses as PostgreSQL refuses a NUL (a
    DataError naming the statement and its parameters)."""

    def __init__(self, bad: str) -> None:
        self.bad, self.calls = bad, 0
        self.kept: list[str] = []

    def record_rows(self, rows: Sequence[GuardRows]) -> int:
        self.calls += 1
        if any(self.bad in r.audit["search_text"] for r in rows):
            raise DataError(
                "INSERT INTO audits (search_text) VALUES (%(text)s)",
                {"text": "the caller's words"},
                Exception("invalid byte sequence"),
            )
        self.kept.extend(r.decision["request_id"] for r in rows)
        return len(rows)


def test_a_decision_the_store_refuses_is_dropped_at_once_and_the_ones_behind_it_are_stored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 73: one refused write held every decision behind it (retried for ever as if the store were away)."""
    store = _PickyStore("answer 3 ")
    tally = [0.0, 0.0, 0.0]
    rows: queue.Queue[GuardRows] = queue.Queue()
    done = threading.Event()
    writer = Writer(store, tally, ended=done.is_set, linger_s=0.01)
    thread = threading.Thread(target=writer.run, args=(rows.get,))
    with caplog.at_level(logging.ERROR, logger="markov_debate.guard"):
        thread.start()
        for n in range(101):
            record = guard_record(n)
            request = record.request.model_copy(update={"response": f"Answer {n} [a]."})
            rows.put(GuardRows.of(dataclasses.replace(record, request=request)))
        _until(lambda: tally[0] + tally[1] == 101)
        done.set()
        thread.join(30)
    assert tally[:2] == [100.0, 1.0] and tally[2] == 0.0  # never "failing": the store was there all along
    assert "guard-3" not in store.kept and len(store.kept) == 100
    assert "decision guard-3 cannot be stored: DataError: invalid byte sequence" in caplog.text
    assert "INSERT" not in caplog.text and "the caller's words" not in caplog.text


def test_text_no_store_holds_is_made_storable_by_one_rule() -> None:
    from markov_debate.desk.store import storable, storable_json

    record = guard_record(1)
    request = record.request.model_copy(update={"response": "a\x00b [a].", "question": "q\x00"})
    rows = GuardRows.of(dataclasses.replace(record, request=request, caller="x\x00"))
    for value in [*rows.audit.values(), *rows.decision.values()]:
        assert not isinstance(value, str) or ("\x00" not in value and "\\u0000" not in value), value
    assert json.loads(rows.audit["request_json"])["response"] == "a\ufffdb [a]."
    assert storable("a\ud800") == "a\ufffd"
    # an escaped backslash before "u0000" is the text \u0000 itself, kept as it is
    assert storable_json(json.dumps({"t": "\\u0000"})) == json.dumps({"t": "\\u0000"})


@pytest.mark.slow  # starts PostgreSQL
def test_a_nul_in_a_request_does_not_stop_the_record_on_postgresql(tmp_path: Path) -> None:
    """The attack of issue 73 against a real PostgreSQL: a decision on a request holding NUL, then 100 more, are
    all stored (the NUL kept as U+FFFD)."""
    from tests.support.desk import postgres_server, skip_without_postgres

    try:
        with postgres_server() as url:
            Store(url).close()
            recorder = Recorder(url, linger_s=0.01)

            async def run() -> int:
                await recorder.start()
                record = guard_record(0)
                request = record.request.model_copy(update={"response": "Nul \x00 here [a].", "question": "q\x00"})
                recorder.add(dataclasses.replace(record, request=request))
                for n in range(1, 101):
                    recorder.add(guard_record(n))
                return await recorder.close(timeout_s=60)

            assert asyncio.run(run()) == 0
            assert recorder.stored == 101 and recorder.dropped == 0 and _count(url) == 101
            store = Store(url)
            try:
                with store._session() as s:
                    texts = list(s.scalars(select(AuditRow.search_text)))
            finally:
                store.close()
            assert any("nul \ufffd here" in t for t in texts)
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        skip_without_postgres(exc)
