"""The verification pipeline over the registered stages (debate.plugins):

    plan (task) -> grounding in the response -> prefilter cascade -> debate (team over the chain) -> rollup -> Report

Each step returns new values (the task's Plan is never changed afterwards). Each stage's failure becomes a typed
`Failure` on its claim (evidence, prefilter, debate) or on the response (the plan: claim extraction, the subjective
filter); other claims go on. `InputError` (the caller's item is malformed) and a fatal `ModelRequestError`
(401/403/404) are raised instead.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol, cast

from debate import telemetry
from debate.calibration import LiveCalibration, calibration_note
from debate.claims import ground_claims
from debate.concurrency import gather_ordered
from debate.engine import MarkovChain, result_records
from debate.errors import CalibrationError, DebateError, InputError, is_fatal
from debate.evidence import localize
from debate.llm import item_scope
from debate.pipeline._escalate import cascade_note
from debate.pipeline._runtime import Runtime
from debate.plugins import TASKS, Plan, Reference, TaskInput, TeamFactory
from debate.prefilter import Cascade, Undecided
from debate.rollup import claim_ratios, response_p_factual, response_score, roll_up
from debate.types import (
    CalibrationNote,
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    ExtractionInfo,
    Failure,
    PrefilterDecision,
    Report,
    RiskLevel,
    Source,
    Usage,
)

__all__ = ["Pipeline", "claim_evaluation", "claim_explanation"]


def claim_explanation(verdict: ClaimVerdict) -> str | None:
    """Why a claim has its label: the reason it is unverifiable, else the debate's final opinion, else the reason of
    the prefilter that decided it."""
    final = verdict.debate.final if verdict.debate is not None else None
    decided = [d.reason for d in verdict.prefilters if d.name == verdict.decided_by]
    return verdict.reason or (final.opinion if final is not None else "; ".join(decided) or None)


def claim_evaluation(verdict: ClaimVerdict) -> dict[str, Any]:
    """A claim's verdict as an evaluation result: name, label, score (with a calibration its p_factual; else 1
    factual, 0 not, none otherwise) and its explanation."""
    explanation = claim_explanation(verdict)
    if verdict.p_factual is not None:
        score: float | None = verdict.p_factual
    else:
        score = None if verdict.factual is None else float(verdict.factual)
    return {
        "name": "claim_factuality",
        "label": verdict.label or verdict.status,
        "score": score,
        "explanation": explanation,
    }


def _prefilter_span(cascade: Cascade, scope: str) -> AbstractContextManager[object]:
    if not cascade.prefilters or not telemetry.active():
        return nullcontext()
    return telemetry.span(
        f"prefilter {scope}", "GUARDRAIL", {"debate.prefilters": [p.name for p in cascade.prefilters]}
    )


def _claims_text(plan: Plan | Failure) -> str:
    return plan.message if isinstance(plan, Failure) else "\n".join(c.text for c in plan.claims)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text_problem(value: str) -> str | None:
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return f"holds a lone surrogate at character {found.start() + 1} (not valid Unicode: bytes that were not UTF-8?)"


def _walk_texts(value: object, where: str, depth: int = 0) -> None:
    if depth > 20:
        raise InputError(f"{where}: nested too deeply")
    if isinstance(value, str):
        problem = _text_problem(value)
        if problem is not None:
            raise InputError(f"{where}: {problem}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk_texts(key, f"{where} key", depth + 1)
            _walk_texts(item, f"{where}[{str(key)[:40]!r}]", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk_texts(item, f"{where}[{index}]", depth + 1)


def _reference(reference: object) -> Reference | None:
    """The reference in a form the tasks read, or an InputError naming what is wrong with it: text, {id: text}, or a
    list of passages (texts, as a batch line gives them), evidence items, sources or {id, text} objects."""
    if reference is None or isinstance(reference, str):
        return reference
    if isinstance(reference, Mapping):
        for key, text in reference.items():
            if not isinstance(text, str):
                raise InputError(f"reference[{str(key)[:40]!r}]: expected text, got {type(text).__name__}")
        return cast(Reference, reference)
    if not isinstance(reference, list | tuple):
        raise InputError(
            "reference: expected text, {id: text} or a list of passages or sources, got " + type(reference).__name__
        )
    if reference and all(isinstance(item, str) for item in reference):
        passages = [p.strip() for p in reference if p.strip()]
        return [Evidence(text=p, source=f"passage {i}", kind="given") for i, p in enumerate(passages, 1)]
    for index, item in enumerate(reference):
        if not isinstance(item, Evidence | Source | Mapping):
            raise InputError(
                f"reference[{index}]: expected a passage, an evidence item or a source, got {type(item).__name__}"
            )
    return cast(Reference, reference)


def check_item(*, response: object, question: object, reference: object, claims: object) -> Reference | None:
    """Refuse, naming the field, what no stage can use: a response or question that is not text, a reference of
    another shape, claims that are not a list of texts, and text that is not valid Unicode anywhere in the item (a
    lone surrogate cannot be sent to an endpoint or stored). Returns the reference as the tasks read it."""
    if not isinstance(response, str):
        raise InputError(f"response: expected text, got {type(response).__name__}")
    if question is not None and not isinstance(question, str):
        raise InputError(f"question: expected text or None, got {type(question).__name__}")
    if claims is not None and (
        not isinstance(claims, Iterable) or isinstance(claims, str) or not all(isinstance(c, str) for c in claims)
    ):
        raise InputError("claims: expected a list of texts")
    for name, value in (("response", response), ("question", question), ("reference", reference), ("claims", claims)):
        _walk_texts(value, name)
    return _reference(reference)


def checked_input(item: object, task: object) -> TaskInput:
    """The item as the stages read it, or an InputError naming the field no stage can use (before any model
    starts, when the caller checks it first)."""
    if not isinstance(item, TaskInput):
        raise InputError(f"item: expected a TaskInput, got {type(item).__name__}")
    if not isinstance(task, str):
        raise InputError(f"task: expected a task name, got {type(task).__name__}")
    if task not in TASKS:  # named before an endpoint is reached: a typo is not "nothing answers at ..."
        try:
            TASKS.get(task)
        except LookupError as exc:
            raise InputError(str(exc)) from exc
    reference = check_item(response=item.response, question=item.question, reference=item.reference, claims=item.claims)
    if not item.response.strip():
        raise InputError("response is empty")
    for name, value in (("id", item.id), ("reference_source", item.reference_source)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name}: expected text or None, got {type(value).__name__}")
    return dataclasses.replace(item, reference=reference)


class ClaimDebater(Protocol):
    """What runs a claim's debate over several teams (debate.pipeline's Escalation for the cascade stop, Chooser
    for the voi stop): the whole debate and its P(factual)."""

    def bind(self) -> None:
        """Check each team's calibration against its models once the endpoints named them, and say at start what
        the teams can decide."""

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> tuple[DebateResult, float | None]: ...


class Pipeline:
    """Verifies responses with a started runtime's resources, one chain and one team factory."""

    def __init__(
        self,
        runtime: Runtime,
        chain: MarkovChain,
        team_factory: TeamFactory,
        calibration: LiveCalibration | None = None,
        escalation: ClaimDebater | None = None,
    ) -> None:
        self.runtime = runtime
        self.chain = chain
        self.team_factory = team_factory
        self.calibration = calibration
        self.escalation = escalation
        """The cascade or voi stop's teams, when the run has more than its own, or chooses."""

    async def verify(self, item: TaskInput, *, task: str = "qa") -> Report:
        """One response's report (see `Verifier.verify` for what each task reads)."""
        item = checked_input(item, task)
        response, question, item_id = item.response, item.question, item.id
        attributes = {"input.value": response, "debate.task": task, "debate.item": item_id, "debate.question": question}
        with item_scope(item_id), telemetry.span("verify", "CHAIN", attributes) as current:
            report = await self._verify(task, item)
            telemetry.set_attributes(current, {"output.value": report.verdict, "debate.claims": len(report.claims)})
            score = report.score if report.p_factual is None else report.p_factual
            telemetry.evaluation(
                current, name="hallucination", label=report.verdict, score=score, explanation=report.note
            )
            return report

    async def _verify(self, task: str, item: TaskInput) -> Report:
        started = time.perf_counter()
        if self.calibration is not None:
            try:
                self.calibration.current()
            except CalibrationError as exc:
                # a calibration file replaced by one that does not fit: no response is scored with it
                return self._failed_report(task, item, Failure.from_error(exc, "calibration"), started)
        response, question = item.response, item.question
        with telemetry.span("extract", "CHAIN", {"input.value": response}) as current:
            plan = await self._plan(task, item)
            if current is not None:
                telemetry.set_attributes(current, {"output.value": _claims_text(plan)})
        if isinstance(plan, Failure):
            return self._failed_report(task, item, plan, started)
        cascade = Cascade(self.runtime.prefilters, min_rounds=self.runtime.config.debate.min_rounds)
        with _prefilter_span(cascade, "response"):
            checks = await cascade.check_response(response, plan)
        if isinstance(checks, Failure):
            return self._failed_report(task, item, checks, started)
        risk = cascade.risk(checks)
        verdicts = await gather_ordered(
            list(enumerate(plan.claims)),
            lambda ic: self._claim(*ic, plan, cascade, risk),
            limit=self.runtime.config.claim_concurrency,
        )
        config = self.runtime.config
        if config.localize:
            verdicts = await self._localized(verdicts)
        outcome = roll_up(verdicts, rule=config.rollup, options=config.rollup_options.get(config.rollup))
        notes = [*plan.notes, *([outcome.note] if outcome.note else [])]
        p_factual, calibration = self._probability(verdicts)
        return Report(
            task=task,
            question=question,
            response=response,
            factual=outcome.factual,
            verdict=outcome.verdict,
            rollup=config.rollup,
            score=response_score(verdicts),
            ratios=claim_ratios(verdicts),
            note="; ".join(notes) or None,
            extraction=plan.extraction,
            prefilter=cascade.summary(verdicts, plan, checks, risk),
            claims=verdicts,
            p_factual=p_factual,
            calibration=calibration,
            usage=plan.extraction.usage + Usage.total(v.usage for v in verdicts),
            elapsed_s=time.perf_counter() - started,
            meta=self.runtime.meta(),
        )

    def _probability(self, verdicts: list[ClaimVerdict]) -> tuple[float | None, CalibrationNote | None]:
        if self.calibration is None:
            return None, None
        config = self.runtime.config
        options = config.rollup_options.get(config.rollup)
        p, why = response_p_factual(verdicts, rule=config.rollup, options=options)
        current = self.calibration.current()
        note = calibration_note(config.debate, current, why, self.calibration.other_team)
        return p, (cascade_note(note, verdicts) if self.escalation is not None else note)

    async def _localized(self, verdicts: list[ClaimVerdict]) -> list[ClaimVerdict]:
        retriever, language = self.runtime.retriever(), self.runtime.config.language
        return [v.model_copy(update={"localized": await localize(v, retriever, language)}) for v in verdicts]

    async def _plan(self, task: str, item: TaskInput) -> Plan | Failure:
        """The task's plan with its claims grounded in the response (the caller's own claims are never dropped),
        or the failure that left the response without claims."""
        try:
            plan = await self.runtime.task(task).plan(item, self.runtime)
        except InputError:
            raise
        except DebateError as exc:
            if is_fatal(exc):
                raise
            return Failure.from_error(exc, "extraction")
        grounded = ground_claims(plan.claims, item.response, may_drop=plan.extraction.method != "given")
        extraction, notes = plan.extraction, list(plan.notes)
        if grounded.dropped:
            extraction = extraction.model_copy(update={"dropped": grounded.dropped})
            notes.append(f"{len(grounded.dropped)} extracted claim(s) dropped: nothing in the response supports them")
        return dataclasses.replace(
            plan, question=item.question, claims=grounded.claims, extraction=extraction, notes=notes
        )

    async def _claim(self, index: int, claim: Claim, plan: Plan, cascade: Cascade, risk: RiskLevel) -> ClaimVerdict:
        with telemetry.span(f"claim {claim.id}", "EVALUATOR", {"input.value": claim.text}) as current:
            verdict = await self._judge_claim(index, claim, plan, cascade, risk)
            if current is not None:  # the explanation is built for the trace only
                telemetry.set_attributes(
                    current, {"output.value": verdict.label or verdict.status, "debate.decided_by": verdict.decided_by}
                )
                telemetry.evaluation(current, **claim_evaluation(verdict))
            return verdict

    async def _judge_claim(
        self, index: int, claim: Claim, plan: Plan, cascade: Cascade, risk: RiskLevel
    ) -> ClaimVerdict:
        try:
            with telemetry.span("evidence", "RETRIEVER", {"input.value": claim.text}) as current:
                evidence, usage = await plan.evidence.evidence(claim)
                if current is not None:
                    telemetry.set_attributes(current, telemetry.documents(evidence))
        except DebateError as exc:
            if is_fatal(exc):
                raise
            failure = Failure.from_error(exc, "evidence")
            return ClaimVerdict.unverifiable(claim, failure, evidence=[], debate=None, usage=Usage())
        with _prefilter_span(cascade, "claim"):
            outcome = await cascade.check_claim(index, claim, evidence, usage, plan, risk)
        if isinstance(outcome, Undecided):
            with telemetry.span("debate", "AGENT", {"debate.chain": self.chain.spec.name}):
                return await self.verify_claim(claim, evidence, usage=outcome.usage, prefilters=outcome.decisions)
        return outcome

    async def verify_claim(
        self,
        claim: Claim,
        evidence: Sequence[Evidence],
        *,
        usage: Usage | None = None,
        prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:
        """Debate one claim over the chain. A failed debate ends `unverifiable` with its typed failure."""
        p: float | None = None
        if self.escalation is not None:
            result, p = await self.escalation.debate(claim, list(evidence))
        else:
            team = self.team_factory.new_team(
                client=self.runtime.client, config=self.runtime.config.debate, chain=self.chain
            )
            result = await team.debate(claim, list(evidence))
        total = result.usage + (usage or Usage())
        if result.final is None:
            failure = result.failure or Failure(kind="reply_unusable", message="no verdict", stage="debate")
            return ClaimVerdict.unverifiable(
                claim, failure, evidence=list(evidence), debate=result, usage=total, prefilters=prefilters
            )
        verdict = ClaimVerdict.verified(
            claim, result.final, evidence=list(evidence), debate=result, usage=total, prefilters=prefilters
        )
        if self.calibration is None:
            return verdict
        if self.escalation is None:
            model = self.calibration.current().model(self.runtime.config.debate.prior)
            p = model.p_debate(self.chain, result_records(result))
        return verdict.model_copy(update={"p_factual": p})

    def _failed_report(self, task: str, item: TaskInput, failure: Failure, started: float) -> Report:
        return Report(
            task=task,
            question=item.question,
            response=item.response,
            factual=None,
            verdict="unverifiable",
            rollup=self.runtime.config.rollup,
            score=None,
            ratios=claim_ratios([]),
            note=f"no claims were judged: {failure.message}",
            failure=failure,
            extraction=ExtractionInfo(method="failed"),
            claims=[],
            usage=Usage(),
            elapsed_s=time.perf_counter() - started,
            meta=self.runtime.meta(),
        )
