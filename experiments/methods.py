"""Detection methods compared in the experiments, each turning an Item into a Prediction.

- mcmad: this engine (all chain knobs; prefilter cascade variants via the prefilter config).
- single: the initial agent only (min_rounds = 0).
- factool: one Factool-style verification call per claim (a registered agent team, so claims, evidence and rollup
  are the engine's own).
- halueval-judge: HaluEval's few-shot Yes/No judge, one call per item.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict

from debate.calls import PromptTemplate, ask_structured, converse, load_json_object, load_prompt, parse_factuality
from debate.config import DebateConfig, VerifierConfig
from debate.engine import TurnRecord, render_evidence, transcript_result
from debate.errors import DebateError, ModelRequestError, ReplyUnusableError
from debate.llm import ChatClient, ChatMessage, ChatRequest
from debate.plugins import Chain, TaskInput
from debate.registry import Registry
from debate.results import transient_failure
from debate.types import Claim, DebateResult, Evidence, Failure, Opinion, Report, Turn, Usage
from experiments.data import Item

if TYPE_CHECKING:
    from debate.pipeline import Verifier

__all__ = [
    "METHODS",
    "DebateMethod",
    "FactoolTeam",
    "FactoolTeamFactory",
    "HaluEvalJudge",
    "Method",
    "MethodEntry",
    "MethodName",
    "Prediction",
    "SelfCheckThreeTeamFactory",
    "SelfCheckZeroTeamFactory",
]

MethodName = str
"""A registered method's name (see METHODS)."""

FACTOOL_NON_FACTUAL_SEVERITY = 4
"""Factool replies carry no severity; a non-factual verdict is mapped to 4, a factual one to 0."""


class Prediction(BaseModel):
    """A method's output for one item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pred_factual: bool | None
    """The verdict; None when unverifiable or failed (scored as wrong)."""
    score: float | None
    """Higher = more factual, for AUROC; None when the method gives none."""
    decided_by: str
    """debate, prefilter:<name>, mixed, judge, none (no claims) or error."""
    usage: Usage
    """Model usage."""
    report: dict[str, Any]
    """The full report (or the judge's transcript)."""
    error: str | None = None
    """Why there is no prediction."""
    transient: bool = False
    """The prediction is missing for a reason that may pass (endpoint down): a re-run redoes the item."""


class Method(Protocol):
    name: str

    async def predict(self, item: Item) -> Prediction: ...

    def prompt_hashes(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class MethodEntry:
    """A detection method for the experiments: the Verifier config it runs with, and how it is built over that
    Verifier. A plugin method is one more entry, registered in METHODS or by the `markov_debate.methods` entry
    point."""

    build: Callable[[Verifier, bool], Method]
    """(the Verifier, judge_knowledge) -> the method."""
    configure: Callable[[VerifierConfig], VerifierConfig] = lambda config: config
    """The run's Verifier config -> the one this method runs with."""
    estimable: bool = False
    """Its calls are the pipeline's over the configured chain, so `--estimate` can predict them."""


def _decided_by(report: Report) -> str:
    who = {c.decided_by for c in report.claims}
    if not who:
        return "none"
    return who.pop() if len(who) == 1 else "mixed"


class DebateMethod:
    """mcmad, single, factool and self-check: everything through a Verifier."""

    def __init__(self, name: str, verifier: Verifier) -> None:
        self.name = name
        self._verifier = verifier

    def prompt_hashes(self) -> dict[str, str]:
        return self._verifier.meta().prompts

    async def predict(self, item: Item) -> Prediction:
        report = await self._verifier.verify(
            TaskInput(item.response, question=item.question, reference=item.reference, claims=item.claims, id=item.id),
            task=item.task,
        )
        transient = transient_failure(report) is not None
        if report.failure is not None:
            return Prediction(
                pred_factual=None,
                score=None,
                decided_by="error",
                usage=report.usage,
                report=report.model_dump(mode="json"),
                error=report.failure.message,
                transient=transient,
            )
        return Prediction(
            pred_factual=report.factual,
            score=report.score,
            decided_by=_decided_by(report),
            usage=report.usage,
            report=report.model_dump(mode="json"),
            transient=transient,
        )


# --- factool: a one-call team -----------------------------------------------------------------------------------

_FACTOOL_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 800},
        "error": {"type": "string", "maxLength": 400},
        "correction": {"type": "string", "maxLength": 400},
        "factuality": {"type": "boolean"},
    },
    "required": ["reasoning", "error", "correction", "factuality"],
}
_FACTOOL_FORMAT = 'a JSON object {"reasoning": "...", "error": "...", "correction": "...", "factuality": true or false}'


def _parse_factool(reply: str) -> Opinion:
    try:
        raw = {k.strip().lower(): v for k, v in load_json_object(reply).items()}
    except ReplyUnusableError:
        raise
    factuality = parse_factuality(raw.get("factuality"))
    reasoning = str(raw.get("reasoning") or "").strip()
    if not reasoning:
        raise ReplyUnusableError('"reasoning" must be a non-empty string')
    error = str(raw.get("error") or "none").strip()
    text = f"{reasoning} Error: {error}. Correction: {str(raw.get('correction') or '').strip()}"
    return Opinion(
        opinion=text, factuality=factuality, error_severity=0 if factuality else FACTOOL_NON_FACTUAL_SEVERITY
    )


class FactoolTeam:
    """One Factool-style verification call per claim (reasoning, error, correction, factuality), recorded as the
    initial state of a chain (no debate). With `use_evidence` off it is Factool's self-check baseline: the model
    judges from its own knowledge."""

    def __init__(
        self, *, client: ChatClient, config: DebateConfig, prompt: PromptTemplate, use_evidence: bool, purpose: str
    ) -> None:
        self._client = client
        self._config = config
        self._prompt = prompt
        self._use_evidence = use_evidence
        self._purpose = purpose

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        values = {"claim": claim.text} | ({"evidence": render_evidence(evidence)} if self._use_evidence else {})
        system, user = self._prompt.render(**values)
        chat = converse(self._client, system, schema=_FACTOOL_SCHEMA, schema_name="factool", purpose=self._purpose)
        try:
            outcome = await ask_structured(
                chat, user, _parse_factool, max_retries=self._config.max_parse_retries, expected=_FACTOOL_FORMAT
            )
        except DebateError as exc:
            if isinstance(exc, ModelRequestError) and exc.fatal:
                raise
            info = chat.info(self._prompt)
            turn = Turn.failed("initial", Failure.from_error(exc, "debate"), info)
        else:
            info = outcome.info(self._prompt)
            if outcome.value is None:
                failure = Failure(kind="reply_unusable", message=outcome.failure or "no usable reply", stage="debate")
                turn = Turn.failed("initial", failure, info)
            else:
                turn = Turn.from_opinion("initial", outcome.value, info)
        return transcript_result([TurnRecord(state="S0", round=0, position=0, last_in_state=True, turn=turn)])


class _OneCallTeamFactory:
    _prompt_name = "factool_verify"
    _use_evidence = True
    _purpose = "factool"

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompt = load_prompt(self._prompt_name, prompts_dir)

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: Chain) -> FactoolTeam:
        return FactoolTeam(
            client=client, config=config, prompt=self._prompt, use_evidence=self._use_evidence, purpose=self._purpose
        )

    def prompt_hashes(self, chain: Chain) -> dict[str, str]:
        return {self._prompt.name: self._prompt.sha256}


class FactoolTeamFactory(_OneCallTeamFactory):
    """Registered as the `factool` team (entry point markov_debate.teams): verification against the evidence."""


class SelfCheckZeroTeamFactory(_OneCallTeamFactory):
    """The `self-check-0` team: Factool's zero-shot self-check, no evidence."""

    _prompt_name = "self_check_0"
    _use_evidence = False
    _purpose = "self-check"


class SelfCheckThreeTeamFactory(SelfCheckZeroTeamFactory):
    """The `self-check-3` team: Factool's self-check with three worked examples, no evidence."""

    _prompt_name = "self_check_3"


# --- HaluEval's own judge -----------------------------------------------------------------------------------------


def halueval_judgement(reply: str) -> bool | None:
    """HaluEval's own rule (evaluate.py): periods removed; "Yes" (hallucinated) or "No", case-sensitive, anywhere in
    the reply; a reply with both or neither is a failure (None), which is scored incorrect."""
    answer = reply.replace(".", "")
    has_yes, has_no = "Yes" in answer, "No" in answer
    if has_yes == has_no:
        return None
    return has_yes


class HaluEvalJudge:
    """HaluEval's judge as its authors ran it: one plain-text call per item, a system message per task, the task's
    few-shot instruction, no knowledge for QA and dialogue unless `knowledge` is on, no re-ask, and the Yes/No rule
    above."""

    name = "halueval-judge"

    def __init__(self, client: ChatClient, *, knowledge: bool = False, prompt_set: str | None = None) -> None:
        self._client = client
        self._knowledge = knowledge
        self._prompts = {
            t: load_prompt(f"halueval_{t}", prompt_set) for t in ("qa", "dialogue", "summarization", "general")
        }

    def prompt_hashes(self) -> dict[str, str]:
        return {p.name: p.sha256 for p in self._prompts.values()}

    def _render(self, item: Item) -> tuple[str, str]:
        knowledge = f"#Knowledge#: {item.reference}\n" if self._knowledge and item.reference else ""
        if item.task == "qa":
            return self._prompts["qa"].render(knowledge=knowledge, question=item.question or "", answer=item.response)
        if item.task == "dialogue":
            return self._prompts["dialogue"].render(
                knowledge=knowledge, dialogue=item.question or "", response=item.response
            )
        if item.task == "summarization":
            return self._prompts["summarization"].render(document=item.reference or "", summary=item.response)
        return self._prompts["general"].render(query=item.question or "", response=item.response)

    async def predict(self, item: Item) -> Prediction:
        system, user = self._render(item)
        started = time.perf_counter()
        request = ChatRequest(
            messages=[ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)],
            purpose="judge",
        )
        try:
            response = await self._client.complete(request)
        except DebateError as exc:
            if isinstance(exc, ModelRequestError) and exc.fatal:
                raise
            return Prediction(
                pred_factual=None,
                score=None,
                decided_by="judge",
                usage=Usage(),
                report={},
                error=str(exc),
                transient=exc.transient,
            )
        transcript = {
            "prompt": f"halueval_{item.task if item.task != 'kbqa' else 'general'}",
            "knowledge": self._knowledge,
            "reply": response.text,
            "elapsed_s": time.perf_counter() - started,
        }
        hallucinated = halueval_judgement(response.text)
        if hallucinated is None:
            error = 'the reply has both or neither of "Yes" and "No" (HaluEval counts it as failed)'
            return Prediction(
                pred_factual=None, score=None, decided_by="judge", usage=response.usage, report=transcript, error=error
            )
        await self._client.accept(response)
        factual = not hallucinated
        return Prediction(
            pred_factual=factual,
            score=1.0 if factual else 0.0,
            decided_by="judge",
            usage=response.usage,
            report=transcript,
        )


def _initial_only(config: VerifierConfig) -> VerifierConfig:
    s0 = DebateConfig(
        min_rounds=0, max_rounds=0, chain=config.debate.chain, max_parse_retries=config.debate.max_parse_retries
    )
    return config.model_copy(update={"debate": s0})


def _factool(config: VerifierConfig) -> VerifierConfig:
    # Factool's own pipeline: short claims as {"claim"} objects, two skeptical queries, its verifier.
    search = config.search.model_copy(update={"queries_prompt": "factool_queries"}) if config.search else None
    claims = config.claims.model_copy(update={"prompt": "factool_claims"})
    return _initial_only(config).model_copy(update={"team": "factool", "claims": claims, "search": search})


def _team(name: str) -> Callable[[VerifierConfig], VerifierConfig]:
    return lambda config: _initial_only(config).model_copy(update={"team": name})


def _debate(name: str) -> Callable[[Verifier, bool], Method]:
    return lambda verifier, _judge_knowledge: DebateMethod(name, verifier)


def _halueval_judge(verifier: Verifier, judge_knowledge: bool) -> Method:
    return HaluEvalJudge(verifier.client, knowledge=judge_knowledge, prompt_set=verifier.config.prompt_set)


MCMAD = MethodEntry(_debate("mcmad"), estimable=True)
SINGLE = MethodEntry(_debate("single"), _initial_only, estimable=True)
FACTOOL = MethodEntry(_debate("factool"), _factool)
HALUEVAL_JUDGE = MethodEntry(_halueval_judge)
SELF_CHECK_0 = MethodEntry(_debate("self-check-0"), _team("self-check-0"))
SELF_CHECK_3 = MethodEntry(_debate("self-check-3"), _team("self-check-3"))

METHODS: Registry[MethodEntry] = Registry(
    "methods",
    listed={
        "mcmad": "this engine: the Markov-chain debate",
        "single": "the initial agent only (S0)",
        "factool": "Factool's pipeline and verifier",
        "halueval-judge": "HaluEval's few-shot Yes/No judge",
        "self-check-0": "Factool's self-check baseline",
        "self-check-3": "Factool's self-check baseline",
    },
)
"""Detection methods by name: the entry points of `markov_debate.methods`, the built-ins' in this project's
pyproject.toml exactly as a plugin's would be (nothing is registered at import)."""
