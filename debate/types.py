"""The pydantic models passed between stages: claims, evidence, agent turns, states, verdicts, reports."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from debate.errors import DebateError, FailureKind

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CallInfo",
    "CitationReport",
    "Claim",
    "ClaimKind",
    "ClaimLabel",
    "ClaimRatios",
    "ClaimStatus",
    "ClaimVerdict",
    "DebateResult",
    "DecidedBy",
    "Evidence",
    "EvidenceKind",
    "ExtractionInfo",
    "Failure",
    "FailureKind",
    "GroundedClaim",
    "GroundingResult",
    "HallucinationCheck",
    "JudgeRubric",
    "Opinion",
    "PrefilterDecision",
    "PrefilterSummary",
    "RagJudgment",
    "Report",
    "ReportVerdict",
    "ResponseCheck",
    "RiskLevel",
    "Role",
    "RollupName",
    "RunMeta",
    "Source",
    "Span",
    "StateName",
    "StateRecord",
    "StopReason",
    "TaskName",
    "Turn",
    "Usage",
]

Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.\-]*$", max_length=64)]
"""A registered name (task, role, state, prefilter, rollup): open to plugins, so checked against its registry
where it is configured rather than listed here."""

Role = Name
"""A debate role: initial, trust, skeptic, leader, or one a chain spec adds."""
StateName = Name
"""A chain state: S0, S1, S2 in the paper's chains."""
TaskName = Name
"""A registered task's name: qa, summarization, dialogue, kbqa, general, rag, or a plugin's."""
PrefilterName = Name
"""A registered prefilter: rules, logprob, or a plugin's."""
RollupName = Name
"""A registered rollup: any-false, strict, soft, major, or a plugin's."""
DecidedBy = Annotated[str, Field(pattern=r"^(debate|prefilter:[A-Za-z][A-Za-z0-9_.\-]*)$")]
"""`debate`, or `prefilter:<name>` for the prefilter that decided."""
ClaimStatus = Literal["verified", "unverifiable"]
ClaimLabel = Literal["factual", "non_factual", "not_enough_evidence"]
"""A verified claim's label; RefChecker's Entailment, Contradiction and Neutral. A failure is never a label."""
ClaimKind = Literal["qa_pair", "atomic", "triplet"]
EvidenceKind = Literal["given", "document", "search", "dialogue_history"]
StopReason = Literal["no_debate", "consensus", "max_rounds", "failed"]
ReportVerdict = Literal["factual", "non_factual", "not_enough_evidence", "unverifiable", "no_claims"]
RiskLevel = Literal["none", "low", "moderate", "high"]
GroundingBand = Literal["supported", "minor extrapolation", "suspicious", "likely hallucination"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(_Model):
    """Model usage, summed over any number of calls."""

    llm_calls: int = Field(default=0, ge=0)
    """Number of completed model calls (HTTP retries of one call are not counted twice)."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Prompt tokens as reported by the endpoint."""
    completion_tokens: int = Field(default=0, ge=0)
    """Completion tokens as reported by the endpoint."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    @classmethod
    def total(cls, items: Iterable[Usage]) -> Usage:
        out = cls()
        for item in items:
            out = out + item
        return out


class Failure(_Model):
    """Why a stage could not finish its work on a claim or response. Never a verdict."""

    kind: FailureKind
    """What went wrong (model unavailable, reply unusable, ...)."""
    message: str
    """What happened, in one line."""
    stage: str
    """Where: extraction, evidence, prefilter:<name>, debate."""
    transient: bool = False
    """True when the same work may succeed later (endpoint down, timeouts, 5xx): such results are redone."""

    @classmethod
    def from_error(cls, exc: DebateError, stage: str) -> Failure:
        return cls(kind=exc.kind, message=str(exc), stage=stage, transient=exc.transient)


class Evidence(_Model):
    """One piece of evidence a claim is judged against."""

    text: str = Field(min_length=1)
    """The evidence text shown to the agents."""
    source: str | None = None
    """Where it came from: a file path, document id, sentence index or URL."""
    kind: EvidenceKind = "given"
    """How it was obtained."""
    score: float | None = None
    """Retrieval score, when retrieved."""
    query: str | None = None
    """The search query that found it, when searched."""


class Source(_Model):
    """A retrievable source a RAG answer may cite as [id]."""

    id: str = Field(min_length=1)
    """The source's id."""
    text: str = ""
    """Its text (empty when only its id matters, e.g. for the citation rules)."""
    parent_id: str | None = None
    """The containing document's id; citing it is valid too."""


class Span(_Model):
    """A character range of the response: response[start:end]."""

    start: int = Field(ge=0)
    """First character."""
    end: int = Field(ge=0)
    """One past the last character."""


class Claim(_Model):
    """One checkable claim."""

    id: str
    """Stable id within its response (c0, c1, ...)."""
    text: str = Field(min_length=1)
    """The claim as shown to the agents."""
    kind: ClaimKind
    """How the claim was formed."""
    triplet: tuple[str, str, str] | None = None
    """(subject, predicate, object) when extracted as a RefChecker triplet; `text` is its sentence form."""
    citations: list[str] = Field(default_factory=list)
    """Source ids the claim cites as [id] (rag task)."""
    spans: list[Span] = Field(default_factory=list)
    """Where in the response the claim comes from (empty for claims the caller gave and the response does not
    contain word for word)."""


class Opinion(_Model):
    """An agent's judgment of a claim, in the paper's reply format."""

    opinion: str = Field(min_length=1)
    """The agent's reasoning."""
    factuality: bool
    """True when the agent judges the claim factual."""
    error_severity: int = Field(ge=0, le=5)
    """0 (no error) to 5 (severe error), the paper's rubric."""
    enough_evidence: bool = True
    """False when the agent says the evidence can neither support nor refute the claim (the reply's optional
    `"enough evidence": false`, asked for by the `refchecker` prompt set only)."""

    @property
    def label(self) -> ClaimLabel:
        if not self.enough_evidence:
            return "not_enough_evidence"
        return "factual" if self.factuality else "non_factual"


class SentMessage(_Model):
    """One message of a turn's exchange with the model, as sent (or received)."""

    role: Literal["system", "user", "assistant"]
    """Who says it."""
    content: str
    """The exact text."""


class CallInfo(_Model):
    """Metadata of the model call(s) behind one turn."""

    prompt: str
    """Prompt file name."""
    prompt_hash: str
    """sha256 of the prompt file."""
    attempts: int = Field(ge=1)
    """Replies requested, counting re-asks after unparseable replies."""
    parse_errors: list[str] = Field(default_factory=list)
    """Why earlier replies were rejected."""
    usage: Usage = Field(default_factory=Usage)
    """Usage of this turn, re-asks included."""
    latency_s: float = Field(default=0.0, ge=0)
    """Wall time of the model calls."""
    finish_reason: str | None = None
    """Finish reason of the last reply."""
    messages: list[SentMessage] | None = None
    """The exact exchange (system, user, replies, re-asks) when `DebateConfig.record_prompts` is on."""


class Turn(_Model):
    """One agent speaking once. A failed turn has `error` set and no opinion."""

    role: Role
    """Which agent spoke."""
    factuality: bool | None = None
    """The agent's verdict."""
    error_severity: int | None = Field(default=None, ge=0, le=5)
    """The agent's 0-5 severity."""
    opinion: str | None = None
    """The agent's reasoning."""
    enough_evidence: bool = True
    """False when the agent said the evidence cannot decide the claim."""
    error: str | None = None
    """Why the turn produced no usable opinion."""
    failure: Failure | None = None
    """The typed failure behind `error`."""
    call: CallInfo
    """Model call metadata."""

    @model_validator(mode="after")
    def _opinion_xor_error(self) -> Self:
        has_opinion = self.factuality is not None and self.error_severity is not None and self.opinion is not None
        if has_opinion == (self.error is not None):
            raise ValueError("a turn has either a complete opinion or an error")
        if (self.error is None) != (self.failure is None):
            raise ValueError("a failed turn has both `error` and `failure`")
        return self

    @classmethod
    def failed(cls, role: Role, failure: Failure, call: CallInfo) -> Turn:
        return cls(role=role, error=failure.message, failure=failure, call=call)

    @classmethod
    def from_opinion(cls, role: Role, opinion: Opinion, call: CallInfo) -> Turn:
        return cls(
            role=role,
            factuality=opinion.factuality,
            error_severity=opinion.error_severity,
            opinion=opinion.opinion,
            enough_evidence=opinion.enough_evidence,
            call=call,
        )

    def as_opinion(self) -> Opinion | None:
        if self.error is not None or self.factuality is None or self.error_severity is None or self.opinion is None:
            return None
        return Opinion(
            opinion=self.opinion, factuality=self.factuality, error_severity=self.error_severity,
            enough_evidence=self.enough_evidence,
        )  # fmt: skip


class StateRecord(_Model):
    """One visit of the chain to a state: S0 once, then one debate round per visit."""

    name: StateName
    """S0 (initial), S1 (trust first) or S2 (skeptic first)."""
    round: int = Field(ge=0)
    """0 for S0, k for debate round k."""
    turns: list[Turn]
    """Turns in speaking order."""
    consensus: bool | None = None
    """Whether all turns agreed on factuality (None when a turn failed)."""


class DebateResult(_Model):
    """The whole chain run for one claim."""

    rounds: int = Field(ge=0)
    """Debate rounds run (S0 not counted)."""
    consensus: bool | None
    """Whether the last debate round agreed; None when no round ran or it failed."""
    stop_reason: StopReason
    """Why the chain stopped."""
    states: list[StateRecord]
    """Every state visited, in order."""
    final: Opinion | None
    """The last Leader's opinion (S0's when no round ran); None when the debate failed."""
    failure: Failure | None = None
    """Why the debate could not finish."""
    usage: Usage = Field(default_factory=Usage)
    """Usage of all turns."""


class GroundingResult(_Model):
    """The logprob grounding signals for one claim (debate.prefilter.grounding_score)."""

    p1: float = Field(ge=0, le=1)
    """P(YES | full context)."""
    p0: float = Field(ge=0, le=1)
    """P(YES | cited sources redacted); for an uncited claim, nothing is redacted (a second call all the same)."""
    has_citations: bool
    """Whether the claim cites sources."""
    evidence_use: float = Field(ge=0, le=1)
    """max(0, p1 - p0)."""
    confidence: float = Field(ge=0, le=1)
    """Cited: min(1, 1.5 * use + (0.3 if p1 > 0.7 else 0)); uncited: 0.7 * p1 if p1 > 0.7 else 0.4 * p1."""
    grounded: bool
    """confidence > 0.45 and (use > 0.15 or uncited)."""
    budget: Literal["seed", "strawberry"] = "seed"
    """Which information-budget definition the next fields follow."""
    observed_bits: float
    """seed: KL(Ber(p1) || Ber(0.5)); strawberry: KL(Ber(p1) || Ber(p0)); in bits."""
    required_bits: float
    """seed: KL(Ber(p1) || Ber(p0)); strawberry: KL(Ber(target) || Ber(p0)); in bits."""
    budget_gap: float
    """seed: observed - required; strawberry: required - observed; in `unit`."""
    unit: Literal["bits", "nats"] = "bits"
    """Unit of budget_gap."""
    budget_gap_bits: float
    """budget_gap in bits."""
    flagged: bool
    """Not grounded (the seed's meaning; a supported claim is never flagged)."""
    band: GroundingBand | None = None
    """strawberry budget only: < 0 supported, 0-2 minor extrapolation, 2-10 suspicious, > 10 likely hallucination
    (bits); None under the seed's budget, which has no bands."""


class GroundedClaim(_Model):
    """One claim in the seed's `hallucination_check` block."""

    text: str
    """The claim."""
    citing: list[str]
    """The source ids it cites (and that were given)."""
    p1: float = Field(ge=0, le=1)
    """P(YES | full context)."""
    p0: float = Field(ge=0, le=1)
    """P(YES | cited sources redacted)."""
    confidence: float = Field(ge=0, le=1)
    """The grounding confidence (GroundingResult.confidence)."""
    grounded: bool
    """Whether the claim is grounded (GroundingResult.grounded)."""
    warning: str | None = None
    """Why an ungrounded claim is suspect."""


class HallucinationCheck(_Model):
    """The seed's response-level grounding block for a RAG answer (logprob prefilter)."""

    overall_grounded: bool
    """At least 70% of the checked claims are grounded."""
    grounded_claims: int = Field(ge=0)
    """Claims found grounded."""
    total_claims: int = Field(ge=0)
    """Claims the logprob check scored."""
    grounding_ratio: float = Field(ge=0, le=1)
    """grounded_claims / total_claims (0 without claims)."""
    claims: list[GroundedClaim]
    """Per claim, in claim order."""
    warning: str | None = None
    """Set whenever any claim is ungrounded, even when the answer is overall grounded (seed 002)."""


class PrefilterDecision(_Model):
    """What one cheap check said about a claim."""

    name: PrefilterName
    """Which prefilter."""
    decision: Literal["pass", "factual", "non_factual", "skipped"]
    """pass: not confident, the debate decides; skipped: the check could not run."""
    reason: str
    """Why."""
    error_severity: int | None = Field(default=None, ge=0, le=5)
    """Severity of the verdict, when the prefilter decided (factual or non_factual)."""
    grounding: GroundingResult | None = None
    """The logprob signals, for the logprob prefilter."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of the check."""


class ClaimVerdict(_Model):
    """The verdict on one claim."""

    claim_id: str
    """The claim's id."""
    text: str
    """The claim text."""
    triplet: tuple[str, str, str] | None = None
    """(subject, predicate, object) when the claim is a RefChecker triplet."""
    spans: list[Span] = Field(default_factory=list)
    """Where in the response the claim comes from."""
    status: ClaimStatus
    """`verified` when the chain produced a verdict, else `unverifiable` (a failure: see `failure`)."""
    label: ClaimLabel | None = None
    """factual, non_factual or not_enough_evidence (the evidence cannot decide); None exactly when a failure left
    the claim unverifiable."""
    factual: bool | None
    """True/False for the labels factual/non_factual; None for not_enough_evidence and when unverifiable."""
    error_severity: int | None = Field(default=None, ge=0, le=5)
    """Severity of the final opinion; None when unverifiable."""
    reason: str | None = None
    """Why the claim is unverifiable."""
    failure: Failure | None = None
    """The typed failure that made the claim unverifiable."""
    evidence: list[Evidence]
    """Evidence the agents saw."""
    debate: DebateResult | None
    """The chain transcript (None when no model call was made)."""
    usage: Usage = Field(default_factory=Usage)
    """Usage spent on this claim."""
    decided_by: DecidedBy = "debate"
    """`debate`, or the prefilter that was confident enough to decide without one."""
    prefilters: list[PrefilterDecision] = Field(default_factory=list)
    """Every prefilter that looked at the claim, in order."""

    @classmethod
    def unverifiable(
        cls, claim: Claim, failure: Failure, *, evidence: list[Evidence], debate: DebateResult | None, usage: Usage,
        prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:  # fmt: skip
        return cls(
            claim_id=claim.id, text=claim.text, triplet=claim.triplet, spans=claim.spans, status="unverifiable",
            factual=None,
            reason=failure.message,
            failure=failure, evidence=evidence, debate=debate, usage=usage, prefilters=prefilters or [],
        )  # fmt: skip

    @classmethod
    def verified(
        cls, claim: Claim, opinion: Opinion, *, evidence: list[Evidence], debate: DebateResult | None, usage: Usage,
        decided_by: DecidedBy = "debate", prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:  # fmt: skip
        return cls(
            claim_id=claim.id, text=claim.text, triplet=claim.triplet, spans=claim.spans, status="verified",
            label=opinion.label,
            factual=None if opinion.label == "not_enough_evidence" else opinion.factuality,
            error_severity=opinion.error_severity, evidence=evidence, debate=debate, usage=usage,
            decided_by=decided_by, prefilters=prefilters or [],
        )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _label_of_older_records(cls, data: Any) -> Any:
        # Records written before labels existed carry only `factual`: their label follows from it.
        if isinstance(data, dict) and "label" not in data and data.get("status") == "verified":
            factual = data.get("factual")
            if isinstance(factual, bool):
                data = {**data, "label": "factual" if factual else "non_factual"}
        return data

    @model_validator(mode="after")
    def _status_consistent(self) -> Self:
        if self.status == "verified":
            if self.label is None or self.error_severity is None or self.reason:
                raise ValueError("a verified claim has a label and severity and no reason")
            expected = {"factual": True, "non_factual": False, "not_enough_evidence": None}[self.label]
            if self.factual is not expected:
                raise ValueError(f"label {self.label} needs factual={expected}")
        if self.status == "unverifiable" and (
            self.factual is not None or self.label is not None or not self.reason or self.failure is None
        ):
            raise ValueError("an unverifiable claim has no label and gives a reason and its failure")
        return self


class RunMeta(_Model):
    """What is needed to reproduce a result."""

    model: str
    """Model name as sent to the endpoint."""
    base_url: str | None
    """Endpoint; the embedded server's loopback URL when embedded."""
    embedded: bool
    """Whether the embedded llama.cpp model answered."""
    config: dict[str, Any]
    """The resolved configuration (API key excluded)."""
    prompt_set: str = "paper"
    """The agents' prompt set (a packaged set name or a directory)."""
    prompts: dict[str, str]
    """Prompt name -> sha256 of the prompt file (and the texts it includes)."""
    seed: int | None
    """Seed sent to the endpoint."""
    package_version: str
    """markov-debate version."""
    git_commit: str | None
    """Commit of the source checkout, when run from one."""
    created_at: datetime
    """When the report was made (UTC)."""


class ClaimRatios(_Model):
    """Shares of the response's claims by status (0 when there are no claims)."""

    factual: float = Field(ge=0, le=1)
    """Verified factual."""
    non_factual: float = Field(ge=0, le=1)
    """Verified not factual."""
    not_enough_evidence: float = Field(default=0.0, ge=0, le=1)
    """The evidence cannot decide (RefChecker's Neutral)."""
    unverifiable: float = Field(ge=0, le=1)
    """A failure left the claim without a label."""


class ExtractionInfo(_Model):
    """How the claims of a response were obtained."""

    method: str
    """Extractor name (qa-pair, llm-sentences, llm-triplets)."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """Prompt name -> sha256, for the prompts used."""
    attempts: int = Field(default=0, ge=0)
    """Model replies requested (re-asks included)."""
    parse_errors: list[str] = Field(default_factory=list)
    """Why earlier replies were rejected."""
    filtered_response: str | None = None
    """Dialogue: the response with subjective content removed (None when nothing factual was left)."""
    dropped: list[str] = Field(default_factory=list)
    """Extracted claims that nothing in the response supports (e.g. copied from the prompt's example): never
    judged."""
    usage: Usage = Field(default_factory=Usage)
    """Usage of extraction (subjective filter included)."""


class CitationReport(_Model):
    """Outcome of the citation rules for one answer (debate.prefilter.citation_check)."""

    has_hallucination_risk: bool
    """hallucination_risk_score > 0.3."""
    hallucination_risk_score: float = Field(ge=0, le=1)
    """1 - min(citation_ratio, 1)."""
    risk_level: RiskLevel
    """none (nothing to check), low, moderate or high."""
    valid_citations: list[str]
    """Cited ids that are a known source or parent id (seed: distinct, first-seen order; occurrences: every one)."""
    invalid_citations: list[str]
    """The other cited ids, the same way."""
    uncited_sentences: list[str]
    """The first 3 sentences longer than 50 characters with no citation, each cut to 100 characters (seed 000)."""
    uncited_count: int = Field(default=0, ge=0)
    """How many such sentences there are in all (the high-risk rule counts them)."""
    citation_ratio: float = Field(ge=0)
    """len(valid_citations) / max(total_claims, 1)."""
    total_claims: int = Field(ge=0)
    """Sentences longer than 20 characters."""
    note: str | None = None
    """Set when there is nothing to check."""


JudgeDecision = Literal["continue", "refine_search", "synthesize"]
RiskAction = Literal["accept", "refine_search", "reject"]


class JudgeRubric(_Model):
    """The LLM judge's reply, in the seed's shape (seed 000 "LLM 評估輸出格式")."""

    score: float = Field(ge=0, le=1)
    """Overall quality of the answer."""
    reasoning: str
    """The judge's reasons."""
    confidence: float = Field(ge=0, le=1)
    """How sure the judge is."""
    decision: JudgeDecision
    """continue (search on), refine_search (search for support), synthesize (the answer can be given)."""
    hallucination_risk: float = Field(ge=0, le=1)
    """The judge's hallucination risk: > 0.6 high, > 0.3 moderate."""
    hallucination_notes: str
    """What the judge found; each unsupported claim on a line starting "Unsupported claim:"."""


class RagJudgment(_Model):
    """The combined rules + judge decision for a RAG answer (the `rag-judge` prefilter, seed 000)."""

    rubric: JudgeRubric | None = None
    """The judge's reply; None when the decision flow did not call the judge (rules risk not moderate)."""
    judge_risk: RiskLevel | None = None
    """The judge's level from its hallucination_risk and notes; None when not called."""
    unsupported_claims: list[str] = Field(default_factory=list)
    """The unsupported claims the judge's notes name (any raises the risk to high)."""
    two_step: bool = False
    """Whether a free-form judgment was converted into the rubric by a second call."""
    convert_model: str | None = None
    """The model that converted it (two-step with a judge model); None: the judge's own model."""
    rules_risk: RiskLevel
    """The citation rules' risk level for the same answer."""
    combined_risk: RiskLevel
    """The seed's combined decision (debate.prefilter.judge.combine_risk)."""
    combined_reasons: list[str]
    """The conditions that set combined_risk."""
    action: RiskAction | None = None
    """What the seed's risk table does with the answer: low accept, moderate refine_search, high reject; None when
    there was nothing to check."""
    earlier_rubric: dict[str, Any] | None = None
    """A report stored by an earlier version (a 1-5 score and pass/fail) keeps that judge reply here, as stored."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_shape(cls, data: Any) -> Any:
        # Reports stored before the seed's judge (desk audits, results logs) must still load.
        if isinstance(data, dict) and "score" in data and "rubric" not in data:
            earlier = ("score", "reasoning", "confidence", "decision", "hallucination_risk", "hallucination_notes")
            data = dict(data)
            data["earlier_rubric"] = {k: data.pop(k) for k in earlier if k in data}
        return data


class ResponseCheck(_Model):
    """What a prefilter found about a whole response (before or after its claims were judged)."""

    name: PrefilterName
    """Which prefilter."""
    risk_level: RiskLevel
    """none (nothing to check), low, moderate or high; a high risk before the claims keeps every claim in the
    debate (no prefilter may decide one factual)."""
    reason: str
    """Why, in one line."""
    citation: CitationReport | None = None
    """The citation rules' report (rules)."""
    judge: RagJudgment | None = None
    """The LLM judge's rubric (rag-judge)."""
    hallucination_check: HallucinationCheck | None = None
    """The grounding block (logprob)."""
    usage: Usage = Field(default_factory=Usage)
    """Model usage of the check."""


class PrefilterSummary(_Model):
    """What the prefilter cascade did for a response."""

    prefilters: list[PrefilterName]
    """Which prefilters ran, in order."""
    checks: list[ResponseCheck] = Field(default_factory=list)
    """Response-level findings, in prefilter order."""
    risk_level: RiskLevel = "none"
    """The highest risk among the checks made before the claims (it decides whether prefilters may decide a
    claim factual)."""
    decided: int = Field(ge=0)
    """Claims decided without a debate."""
    prefilter_calls: int = Field(ge=0)
    """Model calls the prefilters made."""
    debate_calls_saved: int = Field(ge=0)
    """Debate calls not made, counted at the minimum a debate costs (1 + 3 * min_rounds per claim): gross."""
    net_calls_saved: int = 0
    """debate_calls_saved minus the prefilters' own calls (negative when the checks cost more than they saved)."""
    note: str | None = None
    """E.g. that the endpoint gives no logprobs."""

    def _find(self, field: str) -> Any:
        return next((getattr(c, field) for c in self.checks if getattr(c, field) is not None), None)

    @property
    def citation(self) -> CitationReport | None:
        """The citation rules' report, when the rules ran on a RAG answer."""
        return self._find("citation")  # type: ignore[no-any-return]

    @property
    def hallucination_check(self) -> HallucinationCheck | None:
        """The seed's grounding block, when the logprob check scored claims of a RAG answer."""
        return self._find("hallucination_check")  # type: ignore[no-any-return]

    @property
    def judge(self) -> RagJudgment | None:
        """The rag-judge's rubric, when it ran."""
        return self._find("judge")  # type: ignore[no-any-return]


class Report(_Model):
    """The verdict on a whole response."""

    task: TaskName
    """The task setting."""
    question: str | None
    """The question the response answers."""
    response: str
    """The response that was checked."""
    factual: bool | None
    """The rollup's verdict; None when unverifiable or when there are no checkable claims."""
    verdict: ReportVerdict
    """The same as a label."""
    rollup: RollupName = "any-false"
    """The rule that rolled claims up to the response."""
    score: float | None = Field(default=None, ge=0, le=1)
    """Severity-weighted factual share of the claims (see debate.rollup.response_score); None without claims."""
    ratios: ClaimRatios
    """Claim shares by status."""
    note: str | None = None
    """Why the verdict is what it is, when that needs saying (e.g. no checkable claims)."""
    failure: Failure | None = None
    """Set when a response-level stage (claim extraction, the subjective filter) failed: no claims were judged."""
    extraction: ExtractionInfo
    """How the claims were obtained."""
    prefilter: PrefilterSummary | None = None
    """The cascade's summary; None when no prefilter ran."""
    claims: list[ClaimVerdict]
    """Per-claim verdicts in claim order."""
    usage: Usage
    """Usage summed over extraction, evidence retrieval and claims."""
    elapsed_s: float = Field(ge=0)
    """Wall time."""
    meta: RunMeta
    """Reproducibility record."""

    def to_dataframe(self) -> pd.DataFrame:
        """One row per claim (pandas): label, severity, decided by, spans, evidence count, the debate's path."""
        from debate.frames import report_frame

        return report_frame(self)
