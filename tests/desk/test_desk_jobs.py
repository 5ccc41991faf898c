"""Jobs that survive: a killed server resumes its batch with nothing lost or done twice; workers never take the same
audit, on SQLite and on a real PostgreSQL server; `debate worker` processes share a PostgreSQL store."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from markov_debate.desk.auth import Principal
from markov_debate.desk.requests import AuditRequest
from markov_debate.desk.store import Store
from tests.support.desk import DeskProcess, ThreadedDesk, fresh_database, jsonl, settings_for, verdicts, wait_for
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import cli_env

pytestmark = pytest.mark.slow  # starts processes

ITEM = {"question": "What is the capital of France?", "reference": "Paris is the capital of France."}


def slow_model(delay_s: float) -> FakeOpenAI:
    def respond(call: Call) -> Reply:
        reply = verdicts(call)
        reply.delay_s = delay_s
        return reply

    return FakeOpenAI(routes={"debate": respond})


def finished_events(store: Store, audit_ids: list[int]) -> Counter[int]:
    return Counter({i: sum(e.kind == "finished" for e in store.audit(i).events) for i in audit_ids})


def test_a_killed_server_resumes_its_batch(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/desk.sqlite"
    items = [{"id": str(i), **ITEM, "response": f"The capital of France is Paris ({i})."} for i in range(6)]
    with slow_model(0.25) as model:
        first = DeskProcess(db, model.base_url, "--jobs", "2").start()
        try:
            batch = httpx.post(
                first.url + "/v1/batches",
                params={"task": "qa"},
                content=jsonl(items),
                headers={"Content-Type": "application/x-ndjson"},
            ).json()
            store = Store(db)

            def mid_batch() -> bool:
                counts = store.batch(batch["id"]).counts
                return counts.get("done", 0) >= 1 and counts.get("running", 0) >= 1

            wait_for(mid_batch, 60, "the batch to be under way")
        finally:
            first.kill()
        interrupted = store.batch(batch["id"]).counts
        assert interrupted.get("running", 0) >= 1 and interrupted.get("done", 0) < 6
        calls_before = len(model.requests)
        with DeskProcess(db, model.base_url, "--jobs", "2") as second:
            wait_for(lambda: store.batch(batch["id"]).done, 90, "the resumed batch")
            assert httpx.get(second.url + "/v1/health").json()["worker_ready"]
        ids = [a.id for a in store.audits(batch_id=batch["id"], per_page=100).items]
        assert store.batch(batch["id"]).counts == {"done": 6}
        assert set(finished_events(store, ids).values()) == {1}, "every audit is finished exactly once"
        kinds = [e.kind for i in ids for e in store.audit(i).events]
        assert kinds.count("requeued") >= 1 and kinds.count("submitted") == 6
        # Calls the killed server completed were kept by the call cache: the resumed audits only made the rest.
        assert len(model.requests) - calls_before < 7 * (6 - interrupted.get("done", 0))
        store.close()
    assert "sk-endpoint-secret-0123" not in first.log + second.log
    assert b"sk-endpoint-secret-0123" not in b"".join(p.read_bytes() for p in tmp_path.glob("desk.sqlite*"))


def _race(url: str, total: int, threads: int) -> list[int]:
    seed = Store(url)
    for i in range(total):
        seed.submit(Principal(name="t", role="admin"), AuditRequest(response=f"r{i}", reference="x"))
    seed.close()
    claimed: list[int] = []
    lock = threading.Lock()

    def claim_all(worker: str) -> None:
        store = Store(url)  # its own engine and pool, as another process would have
        while (job := store.claim(worker, 30)) is not None:
            with lock:
                claimed.append(job.audit_id)
        store.close()

    pool = [threading.Thread(target=claim_all, args=(f"w{k}",)) for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(60)
    return claimed


def test_workers_never_take_the_same_audit_sqlite(tmp_path: Path) -> None:
    claimed = _race(f"sqlite:///{tmp_path}/race.sqlite", 40, 4)
    assert sorted(claimed) == list(range(1, 41))


def test_workers_never_take_the_same_audit_postgres(postgres: str) -> None:
    claimed = _race(fresh_database(postgres), 40, 4)
    assert sorted(claimed) == list(range(1, 41))


def test_an_expired_lease_goes_back_to_the_queue_postgres(postgres: str) -> None:
    store = Store(fresh_database(postgres))
    audit_id, _ = store.submit(Principal(name="t", role="admin"), AuditRequest(response="r", reference="x"))
    assert store.claim("dead-worker", 0.01) is not None
    wait_for(lambda: store.requeue_expired() == [audit_id], 5, "the lease to run out")
    job = store.claim("live-worker", 30)
    assert job is not None and job.audit_id == audit_id and job.attempts == 2
    assert store.renew("dead-worker", [audit_id], 30) == [audit_id]  # the dead worker no longer holds it
    assert [e.kind for e in store.audit(audit_id).events] == ["submitted", "claimed", "requeued", "claimed"]
    store.close()


def test_worker_processes_share_a_postgres_store(tmp_path: Path, postgres: str) -> None:
    url = fresh_database(postgres)
    with slow_model(0.1) as model, ThreadedDesk(settings_for(url, model.base_url, jobs=0)) as desk:
        client = desk.client()
        items = [{"id": str(i), **ITEM, "response": f"Paris ({i})."} for i in range(8)]
        batch = client.post("/v1/batches", content=jsonl(items), headers={"Content-Type": "application/x-ndjson"})
        assert batch.status_code == 202
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "debate.cli",
                    "worker",
                    "--db",
                    url,
                    "--model.base-url",
                    model.base_url,
                    "--model.model",
                    "fake-model",
                    "--jobs",
                    "1",
                    "--cache",
                    str(tmp_path / f"cache{k}"),
                ],
                env={**cli_env(), "OPENAI_API_KEY": "sk-endpoint-secret-0123"},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for k in range(2)
        ]
        try:
            wait_for(lambda: client.get(f"/v1/batches/{batch.json()['id']}").json()["done"], 120, "the workers")
        finally:
            for worker in workers:
                worker.terminate()
            logs = [w.communicate(timeout=30)[0] for w in workers]
        ids = [a.id for a in desk.store.audits(batch_id=batch.json()["id"], per_page=100).items]
        assert set(finished_events(desk.store, ids).values()) == {1}
        claimers = {e.actor for i in ids for e in desk.store.audit(i).events if e.kind == "claimed"}
        assert len(claimers) == 2, logs
        stats = client.get("/v1/stats").json()
        assert stats["by_status"] == {"done": 8} and stats["llm_calls"] == 56
        assert json.dumps(stats)
