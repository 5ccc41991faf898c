"""Detection methods compared in the experiments, each turning an Item into a Prediction.

- mcmad: this engine (all chain knobs; prefilter cascade variants via the prefilter config).
- single: the initial agent only (min_rounds = 0).
- factool: one Factool-style verification call per claim (a registered agent team, so claims, evidence and rollup
  are the engine's own).
- halueval-judge: HaluEval's few-shot Yes/No judge, one call per item.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from agents.team import render_evidence
from debate.api import Verifier
from debate.chain import MarkovChain, TurnRecord, transcript_result
from debate.config import DebateConfig
from debate.errors import DebateError, ModelRequestError, ReplyUnusableError
from debate.jsonl import is_final
from debate.llm import ChatClient
from debate.parsing import load_json_object, parse_factuality
from debate.prompts import PromptTemplate, load_prompt
from debate.structured import ask_structured, call_info, converse
from debate.types import Claim, DebateResult, Evidence, Failure, Opinion, Report, Turn, Usage
from experiments.data import Item

__all__ = [
    "METHODS",
    "DebateMethod",
    "FactoolTeam",
    "FactoolTeamFactory",
    "HaluEvalJudge",
    "Method",
    "MethodName",
    "Prediction",
]

MethodName = Literal["mcmad", "single", "factool", "halueval-judge"]
METHODS: tuple[MethodName, ...] = ("mcmad", "single", "factool", "halueval-judge")

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


def _decided_by(report: Report) -> str:
    who = {c.decided_by for c in report.claims}
    if not who:
        return "none"
    return who.pop() if len(who) == 1 else "mixed"


class DebateMethod:
    """mcmad, single and factool: everything through a Verifier."""

    def __init__(self, name: str, verifier: Verifier) -> None:
        self.name = name
        self._verifier = verifier

    async def predict(self, item: Item) -> Prediction:
        report = await self._verifier.verify(
            item.response, question=item.question, reference=item.reference, task=item.task, claims=item.claims
        )
        transient = not is_final({"report": report.model_dump(mode="json", include={"failure", "claims"})})
        if report.failure is not None:
            return Prediction(
                pred_factual=None, score=None, decided_by="error", usage=report.usage,
                report=report.model_dump(mode="json"), error=report.failure.message, transient=transient,
            )  # fmt: skip
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
    """One Factool-style verification call per claim, recorded as the initial state of a chain (no debate)."""

    def __init__(self, *, client: ChatClient, config: DebateConfig, prompt: PromptTemplate) -> None:
        self._client = client
        self._config = config
        self._prompt = prompt

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        system, user = self._prompt.render(claim=claim.text, evidence=render_evidence(evidence))
        chat = converse(self._client, system, schema=_FACTOOL_SCHEMA, schema_name="factool",
                                   purpose="factool")  # fmt: skip
        try:
            outcome = await ask_structured(
                chat, user, _parse_factool, max_retries=self._config.max_parse_retries, expected=_FACTOOL_FORMAT
            )
        except DebateError as exc:
            if isinstance(exc, ModelRequestError) and exc.fatal:
                raise
            info = call_info(self._prompt, chat.responses, max(1, len(chat.responses)), [])
            turn = Turn.failed("initial", Failure.from_error(exc, "debate"), info)
        else:
            info = call_info(self._prompt, chat.responses, outcome.attempts, outcome.errors)
            if outcome.value is None:
                failure = Failure(kind="reply_unusable", message=outcome.failure or "no usable reply", stage="debate")
                turn = Turn.failed("initial", failure, info)
            else:
                turn = Turn.from_opinion("initial", outcome.value, info)
        return transcript_result([TurnRecord(state="S0", round=0, position=0, last_in_state=True, turn=turn)])


class FactoolTeamFactory:
    """Registered as the `factool` team (entry point markov_debate.teams)."""

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompt = load_prompt("factool_verify", prompts_dir)

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: MarkovChain) -> FactoolTeam:
        return FactoolTeam(client=client, config=config, prompt=self._prompt)

    def prompt_hashes(self, chain: MarkovChain) -> dict[str, str]:
        return {self._prompt.name: self._prompt.sha256}


# --- HaluEval's own judge -----------------------------------------------------------------------------------------

_JUDGE_REPLY = re.compile(r"^\W*(yes|no)\b", re.I)


_JUDGEMENT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"judgement": {"type": "string", "enum": ["Yes", "No"]}},
    "required": ["judgement"],
}
"""Where the endpoint constrains decoding, the Yes/No answer is forced; a plain "Yes"/"No" is parsed too."""


def _parse_judgement(reply: str) -> bool:
    """True when the judge says the output is hallucinated."""
    if "{" in reply:
        try:
            value = load_json_object(reply).get("judgement")
        except ValueError:
            value = None
        if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
            return value.strip().lower() == "yes"
    text = re.sub(r"^\s*#?\s*your judgement\s*#?\s*:?", "", reply.strip(), flags=re.I)
    match = _JUDGE_REPLY.match(text)
    if match is None:
        raise ReplyUnusableError('the reply must start with "Yes" or "No"')
    return match.group(1).lower() == "yes"


class HaluEvalJudge:
    """One Yes/No call per item with the task's HaluEval-style few-shot judge prompt."""

    name = "halueval-judge"

    def __init__(self, client: ChatClient, *, max_retries: int = 2) -> None:
        self._client = client
        self._max_retries = max_retries
        self._prompts = {t: load_prompt(f"halueval_{t}") for t in ("qa", "dialogue", "summarization", "general")}

    def prompt_hashes(self) -> dict[str, str]:
        return {p.name: p.sha256 for p in self._prompts.values()}

    def _render(self, item: Item) -> tuple[str, str]:
        knowledge = f"#Knowledge#: {item.reference}\n" if item.reference else ""
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
        chat = converse(self._client, system, schema=_JUDGEMENT_SCHEMA, schema_name="judgement", purpose="judge")
        started = time.perf_counter()
        try:
            outcome = await ask_structured(
                chat, user, _parse_judgement, max_retries=self._max_retries, expected='"Yes" or "No"'
            )
        except DebateError as exc:
            if isinstance(exc, ModelRequestError) and exc.fatal:
                raise
            return Prediction(
                pred_factual=None, score=None, decided_by="judge", usage=Usage.total(r.usage for r in chat.responses),
                report={"replies": [r.text for r in chat.responses]}, error=str(exc), transient=exc.transient,
            )  # fmt: skip
        usage = Usage.total(r.usage for r in chat.responses)
        transcript = {
            "prompt": f"halueval_{item.task if item.task != 'kbqa' else 'general'}",
            "replies": [r.text for r in chat.responses],
            "parse_errors": outcome.errors,
            "elapsed_s": time.perf_counter() - started,
        }
        if outcome.value is None:
            return Prediction(
                pred_factual=None, score=None, decided_by="judge", usage=usage, report=transcript, error=outcome.failure
            )
        factual = not outcome.value
        return Prediction(
            pred_factual=factual, score=1.0 if factual else 0.0, decided_by="judge", usage=usage, report=transcript
        )
