"""A decision as the desk keeps it: an audit of the answer (finished with its report when the request path decided
every claim, else pending for a worker's debate) and the guard's own row beside it."""

from __future__ import annotations

from debate.results import transient_failure
from debate.types import Report
from markov_debate.desk.requests import AuditOverrides, AuditRequest
from markov_debate.desk.store import GuardRecord, utcnow
from markov_debate.guard.decide import Verification
from markov_debate.guard.record import Recorder
from markov_debate.guard.sources import RequestText, checkable

__all__ = ["finished", "record_decision"]


def finished(report: Report | None) -> bool:
    """Whether `report` is the audit's result: no claim waits for a later debate, none failed for a reason that
    may pass."""
    if report is None or report.failure is not None or transient_failure(report) is not None:
        return False
    return not any(c.failure is not None and c.failure.kind == "deferred" for c in report.claims)


def record_decision(
    recorder: Recorder,
    text: RequestText,
    answer: str | None,
    found: Verification,
    report: Report | None,
    *,
    caller: str,
    route: str | None,
) -> None:
    """Queue the decision for the store (a choice without text has nothing to audit and is only logged)."""
    recorder.actions[found.action] += 1
    if answer is None or not answer.strip():
        return
    request = AuditRequest.model_construct(
        task="rag" if text.sources else "general",
        response=checkable(answer),
        question=text.question,
        reference={s.id: s.text for s in text.sources} or None,
        claims=None,
        # Given, not defaulted: pydantic's model_construct inspects a default factory's signature on every call.
        overrides=AuditOverrides(),
    )
    recorder.add(
        GuardRecord(
            request=request,
            request_id=found.request_id,
            caller=caller,
            at=utcnow(),
            route=route,
            policy=found.policy,
            action=found.action,
            status=found.status,
            risk=found.risk,
            verification_json=found.model_dump_json(),
            report=report,
            finished=finished(report),
        )
    )
