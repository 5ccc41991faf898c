"""Liveness and readiness, the same on the desk and the guard, so one load balancer or service manager check fits
both: `/livez` (the process serves HTTP: restart it if not) and `/readyz` (it can do its work now: send it traffic
if so), GET or HEAD. Readiness asks the store with a real read, under a deadline, every time: a store that went
away is seen at once, not when the next write fails."""

from __future__ import annotations

import asyncio

from sqlalchemy.exc import SQLAlchemyError

from markov_debate.desk.store import Store

__all__ = ["LIVE", "PROBE_PATHS", "STORE_DEADLINE_S", "store_problem"]

LIVE = {"status": "alive"}
PROBE_PATHS = ("/livez", "/readyz", "/healthz", "/v1/health")
"""Every server answers each of these (the desk's `/v1/health` and `/healthz` are its detailed health; the guard's
are its readiness with its counts)."""
STORE_DEADLINE_S = 2.0


async def store_problem(store: Store, deadline_s: float = STORE_DEADLINE_S) -> str | None:
    """None when the store answers a read within `deadline_s`; else why not, in words that name no host."""
    try:
        await asyncio.wait_for(asyncio.to_thread(store.schema_revision), deadline_s)
    except TimeoutError:
        return f"the store did not answer within {deadline_s:g} s"
    except (SQLAlchemyError, OSError):
        return "the store does not answer"
    return None
