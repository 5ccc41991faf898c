"""bench_desk's large-store mode: a store of N finished audits x C claims (one real audit run through the desk
and the fake endpoint, then copied in bulk with varied labels and some reviews), and the read routes' latency on
it: the review queue (API and page), the audit list (first and a deep page, API and page), health, and four queue
requests at once; with the server's resident memory.

    python benchmarks/bench_desk.py --large-store 10000 --claims 25
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, insert, select, text

from markov_debate.desk.store.queueing import claim_draw, queue_of
from markov_debate.desk.tables import AuditRow, ClaimRow, ReviewRow

ROUTES = (
    "/v1/review-queue?limit=50",
    "/v1/review-queue?limit=1",
    "/queue",
    "/v1/audits?per_page=50",
    "/v1/audits?per_page=50&page={deep}",
    "/v1/audits?per_page=50&before={middle}",
    "/",
    "/?page={deep}",
    "/?before={middle}",
    "/v1/health",
)


def _fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
    return time.perf_counter() - started


def _template(desk: Any, claims: int) -> int:
    """One audit with `claims` given claims, run for real; its id."""
    body = {
        "task": "qa",
        "question": "What do we know about Paris?",
        "response": " ".join(f"Paris fact number {i} holds." for i in range(claims)),
        "reference": "Paris is the capital of France. " * 5,
        "claims": [f"Paris fact number {i} holds." for i in range(claims)],
    }
    request = urllib.request.Request(
        desk.url + "/v1/audits", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        audit_id = int(json.loads(response.read())["id"])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{desk.url}/v1/audits/{audit_id}", timeout=30) as response:
            if json.loads(response.read())["status"] == "done":
                return audit_id
        time.sleep(0.5)
    raise SystemExit("bench_desk: the template audit did not finish in 300 s")


def _fill(engine: Engine, template_id: int, audits: int) -> dict[str, int]:
    """Copies of the template audit up to `audits`: every fifth claim not factual, and one audit in three has its
    first needs-review claim reviewed (so the queue skips reviewed claims, as in a working desk)."""
    with engine.begin() as conn:
        audit = dict(conn.execute(select(AuditRow.__table__).where(AuditRow.id == template_id)).mappings().one())
        claims = [
            dict(r) for r in conn.execute(select(ClaimRow.__table__).where(ClaimRow.audit_id == template_id)).mappings()
        ]
    first_id = template_id + 1
    reviews = 0
    for start in range(first_id, template_id + audits, 500):
        stop = min(start + 500, template_id + audits)
        audit_rows, claim_rows, review_rows = [], [], []
        for audit_id in range(start, stop):
            audit_rows.append({**audit, "id": audit_id, "idempotency_key": None})
            reviewed_one = audit_id % 3 == 0
            for claim in claims:
                label = "non_factual" if claim["position"] % 5 == 0 else "factual"
                queue: str | None = queue_of(label)
                if reviewed_one and claim["position"] == 0:
                    queue = None
                    review_rows.append(_review(audit_id, claim["claim_id"], label, audit["finished_at"]))
                claim_rows.append(
                    {
                        **claim,
                        "audit_id": audit_id,
                        "engine_label": label,
                        "queue": queue,
                        "draw": claim_draw(audit_id, claim["claim_id"]),
                    }
                )
        with engine.begin() as conn:
            conn.execute(insert(AuditRow.__table__), audit_rows)
            conn.execute(insert(ClaimRow.__table__), claim_rows)
            if review_rows:
                conn.execute(insert(ReviewRow.__table__), review_rows)
        reviews += len(review_rows)
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("SELECT setval(pg_get_serial_sequence('audits', 'id'), (SELECT max(id) FROM audits))"))
            conn.execute(text("ANALYZE"))
    return {"audits": audits, "claims": audits * len(claims), "reviews": reviews}


def _review(audit_id: int, claim_id: str, label: str, at: Any) -> dict[str, Any]:
    return {
        "audit_id": audit_id,
        "claim_id": claim_id,
        "reviewer": "bench",
        "created_at": at,
        "decision": "confirm",
        "label": label,
        "engine_label": label,
        "decided_by": "debate",
        "note": "",
    }


def _rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident memory now and at its peak, in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Vm")
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def measure(url: str, pid: int, repeats: int, deep: int) -> dict[str, Any]:
    """Each route `repeats` times in turn (after one warm-up), then four queue requests at once with health.
    `deep`: the list page read as a deep page (the middle of the store)."""
    out: dict[str, Any] = {"rss_start_mb": round(_rss_mb(pid)[0], 1)}
    for route in ROUTES:
        target = url + route.format(deep=deep, middle=max(2, deep * 50))
        _fetch(target)
        samples = [_fetch(target) for _ in range(repeats)]
        out[route] = (round(1000 * statistics.median(samples), 1), _percentile(samples, 0.99))
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        queued = [pool.submit(_fetch, url + "/v1/review-queue?limit=50") for _ in range(4)]
        health = pool.submit(_fetch, url + "/v1/health")
        out["parallel_queue_max_ms"] = round(1000 * max(f.result() for f in queued), 1)
        out["health_during_ms"] = round(1000 * health.result(), 1)
    rss, peak = _rss_mb(pid)
    out["rss_end_mb"], out["rss_peak_mb"] = round(rss, 1), round(peak, 1)
    return out


def run_large(store: str, db_url: str, args: argparse.Namespace, folder: Path, desk_type: Any, endpoint: Any) -> None:
    """Build the store, then start a server on it alone (no worker) and measure."""
    with endpoint(args.latency_ms) as base:
        desk = desk_type(db_url, base, 1, 8, folder)
        try:
            template = _template(desk, args.claims)
        finally:
            desk.close()
        engine = create_engine(db_url)
        started = time.monotonic()
        filled = _fill(engine, template, args.large_store)
        engine.dispose()
        print(f"  [{store}] filled {filled} in {time.monotonic() - started:.0f} s", flush=True)
        desk = desk_type(db_url, base, 0, 8, folder)
        try:
            assert desk.server is not None
            figures = measure(desk.url, desk.server.pid, args.repeats, max(1, args.large_store // 100))
        finally:
            desk.close()
    print(f"\n{store}: {args.large_store} audits x {args.claims} claims, {args.repeats} requests a route")
    print(f"route (deep page: {max(1, args.large_store // 100)}) | p50 ms | p99 ms")
    for route in ROUTES:
        p50, p99 = figures[route]
        deep = max(1, args.large_store // 100)
        print(f"{route.format(deep=deep, middle=max(2, deep * 50))} | {p50} | {p99}")
    print(
        f"4 queue requests at once: slowest {figures['parallel_queue_max_ms']} ms; health meanwhile "
        f"{figures['health_during_ms']} ms; server RSS {figures['rss_start_mb']} -> {figures['rss_end_mb']} MB "
        f"(peak {figures['rss_peak_mb']} MB)"
    )
