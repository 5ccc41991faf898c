"""What every request of the guard shares, and the verification of one answer with its action."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from debate import telemetry
from debate.concurrency import gather_ordered
from debate.types import Report
from markov_debate.guard.check import NO_SOURCES, Checker
from markov_debate.guard.decide import Verification, act, failed, verification
from markov_debate.guard.record import Recorder
from markov_debate.guard.settings import GuardSettings, RouteSettings, StreamMode
from markov_debate.guard.sources import RequestText, checkable
from markov_debate.guard.upstream import Upstream

__all__ = ["NO_SOURCES_LATER", "Guard", "new_request_id"]


NO_SOURCES_LATER = (
    "the request carried no sources: nothing in the request path checks an answer without them; the audit waits on "
    "the desk for a debate on the judge model's own knowledge"
)


@dataclass
class Guard:
    """What every request shares: the settings, the upstream's pool, the Verifiers and the decision writer."""

    settings: GuardSettings
    upstream: Upstream
    checker: Checker
    recorder: Recorder

    async def verify_answer(
        self,
        text: RequestText,
        answer: str | None,
        *,
        request_id: str,
        chosen: RouteSettings,
        stream: StreamMode | None = None,
    ) -> tuple[Verification, Report | None]:
        """The answer's verification with its action, and the report it rests on (None when none was made); traced
        as a `verification` span carrying the decision."""
        with telemetry.span("verification", "GUARDRAIL", {"debate.request_id": request_id}) as current:
            found, report = await self._verify_answer(text, answer, request_id=request_id, chosen=chosen, stream=stream)
            decision: dict[str, str] = {
                "debate.action": found.action,
                "debate.status": found.status,
                "debate.policy": found.policy,
            }
            if found.risk is not None:
                decision["debate.risk"] = found.risk
            if found.verdict is not None:
                decision["debate.verdict"] = found.verdict
            telemetry.set_attributes(current, decision)
            return found, report

    async def verify_choices(
        self,
        text: RequestText,
        answers: list[tuple[int, str | None]],
        *,
        request_id: str,
        chosen: RouteSettings,
        stream: StreamMode | None = None,
    ) -> list[tuple[Verification, Report | None]]:
        """Each (choice index, answer)'s `verify_answer`, in order, under `request_id` for a lone choice and
        `request_id.<index>` for each of several. Started eagerly: an answer the cheap checks decide is verified in
        one go, not between every other request's work."""
        if len(answers) == 1:  # the usual request: no task to make
            ((_, answer),) = answers
            return [await self.verify_answer(text, answer, request_id=request_id, chosen=chosen, stream=stream)]
        return await gather_ordered(
            answers,
            lambda a: self.verify_answer(text, a[1], request_id=f"{request_id}.{a[0]}", chosen=chosen, stream=stream),
            limit=len(answers),
        )

    async def _verify_answer(
        self,
        text: RequestText,
        answer: str | None,
        *,
        request_id: str,
        chosen: RouteSettings,
        stream: StreamMode | None = None,
    ) -> tuple[Verification, Report | None]:
        sources = len(text.sources)
        base = Verification(
            request_id=request_id,
            status="unverified",
            verdict=None,
            risk=None,
            action="passed",
            policy=chosen.policy or "annotate",
            debate=chosen.debate or "inline",
            sources=sources,
            notes=list(text.notes),
        )
        if answer is None or not answer.strip():
            return base.model_copy(update={"notes": [*base.notes, "the answer has no text: nothing to verify"]}), None
        if self.recorder.full:
            why = "the decision store has been unavailable for long and its backlog is full"
            return failed(why, request_id=request_id, chosen=chosen, sources=sources), None
        if chosen.debate == "later" and not text.sources:
            return base.model_copy(update={"notes": [*base.notes, NO_SOURCES_LATER]}), None
        report = await self.checker.check(
            checkable(answer),
            question=text.question,
            sources=text.sources,
            request_id=request_id,
            mode=chosen.debate or "inline",
            timeout_s=self.settings.check_timeout_s,
        )
        extra = [*text.notes, *([NO_SOURCES] if not text.sources else [])]
        if isinstance(report, str):
            return _noted(failed(report, request_id=request_id, chosen=chosen, sources=sources), extra), None
        found = verification(
            report, request_id=request_id, chosen=chosen, block_below=self.settings.block_below, sources=sources
        )
        if isinstance(found, str):
            return _noted(failed(found, request_id=request_id, chosen=chosen, sources=sources), extra), report
        return act(_noted(found, extra), chosen, stream=stream), report


def _noted(found: Verification, notes: list[str]) -> Verification:
    """`found` with the request's own notes first (its sources, what was cut); the failure's reason stays last."""
    return found.model_copy(update={"notes": [*notes, *found.notes]})


def new_request_id() -> str:
    return f"guard-{uuid.uuid4().hex}"
