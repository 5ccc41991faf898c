"""The verdicts: per claim, and the report on a whole response with its run metadata."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, model_validator

from debate.types._core import Claim, Evidence, Failure, Span, Usage, _Model
from debate.types._identity import ModelIdentity
from debate.types._names import ClaimLabel, ClaimStatus, DecidedBy, ReportVerdict, RollupName, TaskName
from debate.types._prefilter import PrefilterDecision, PrefilterSummary
from debate.types._transcript import DebateResult, Opinion, turns_by_model

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ClaimRatios", "ClaimVerdict", "ExtractionInfo", "LocatedEvidence", "Report", "RunMeta"]


class LocatedEvidence(_Model):
    """One evidence sentence a claim's verdict rests on (RefChecker's evidence localization)."""

    evidence: int = Field(ge=0)
    """Index of the evidence item (in the claim's `evidence`) the sentence is in."""
    start: int = Field(ge=0)
    """Where the sentence starts in that item's text."""
    end: int = Field(ge=0)
    """Where it ends."""
    text: str
    """The sentence."""
    element: Literal["claim", "subject", "predicate", "object"]
    """What of the claim it was matched to: the claim text, or one element of its triplet."""
    score: float
    """The retriever's similarity (cosine for dense, BM25 score for bm25)."""
    role: Literal["supports", "contradicts", "related"]
    """From the claim's label: factual supports, non_factual contradicts, not_enough_evidence related."""


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
    localized: list[LocatedEvidence] = Field(default_factory=list)
    """With `localize` on: for each element of the claim, the evidence sentence that matches it best."""
    p_factual: float | None = Field(default=None, ge=0, le=1)
    """With a calibration: P(the claim is factual | every turn of its debate) under the fitted model (exact); None
    without one, for a claim a prefilter decided, and for a debate with a failed turn."""

    @classmethod
    def unverifiable(
        cls,
        claim: Claim,
        failure: Failure,
        *,
        evidence: list[Evidence],
        debate: DebateResult | None,
        usage: Usage,
        prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:
        return cls(
            claim_id=claim.id,
            text=claim.text,
            triplet=claim.triplet,
            spans=claim.spans,
            status="unverifiable",
            factual=None,
            reason=failure.message,
            failure=failure,
            evidence=evidence,
            debate=debate,
            usage=usage,
            prefilters=prefilters or [],
        )

    @classmethod
    def verified(
        cls,
        claim: Claim,
        opinion: Opinion,
        *,
        evidence: list[Evidence],
        debate: DebateResult | None,
        usage: Usage,
        decided_by: DecidedBy = "debate",
        prefilters: list[PrefilterDecision] | None = None,
    ) -> ClaimVerdict:
        return cls(
            claim_id=claim.id,
            text=claim.text,
            triplet=claim.triplet,
            spans=claim.spans,
            status="verified",
            label=opinion.label,
            factual=None if opinion.label == "not_enough_evidence" else opinion.factuality,
            error_severity=opinion.error_severity,
            evidence=evidence,
            debate=debate,
            usage=usage,
            decided_by=decided_by,
            prefilters=prefilters or [],
        )

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
    roles: dict[str, str] = Field(default_factory=dict)
    """Each role whose turns ran on a model of its own (`roles.<role>.model`), and that model's name; every other
    role ran on `model`."""
    team: dict[str, ModelIdentity] = Field(default_factory=dict)
    """Each role of the chain and the identity of the model it ran on (name and sampling settings; empty in
    reports made before it was kept)."""
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
    files: dict[str, str] = Field(default_factory=dict)
    """Each file the verdicts depend on, by the setting that names it (debate.calibration, search.collection, a
    prompt_set folder) -> sha256 of its content: a resumed batch refuses one changed in place."""
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


class CalibrationNote(_Model):
    """Where a report's probabilities come from."""

    file: str
    """The calibration file."""
    fitted_on: str
    """What it was fitted on, in a line (runs, claims, classes)."""
    calibrated: bool
    """False when a check of the model's assumptions failed on the fitted run."""
    warning: str | None = None
    """Why p_factual is not calibrated (the failed checks, named)."""
    response_note: str | None = None
    """Why the response has no p_factual, when it has none."""
    stop: str = "consensus"
    """The stop rule the debates ran under (consensus, or posterior:P)."""
    sha256: str | None = None
    """The calibration file's sha256: which calibration scored this report, for an audit."""
    prior: float | None = None
    """The share of factual claims p_factual assumes (`--prior`, else the fitted run's)."""
    share_interval: tuple[float, float] | None = None
    """The 95% profile-likelihood interval of the fitted share of factual claims, for a fit with unlabelled claims
    whose share was estimated from the turns (None: labelled, or stated with --base-rate)."""
    base_rate: float | None = None
    """The share of factual claims stated when the calibration was fitted (`debate dynamics fit --base-rate`)."""


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
    p_factual: float | None = Field(default=None, ge=0, le=1)
    """With a calibration: P(the response is factual) under its rollup from the claims' p_factual, claims taken as
    independent (any-false: the probability that every claim is factual); None when a claim has none (`calibration`
    says why)."""
    calibration: CalibrationNote | None = None
    """The calibration the probabilities come from, and whether they are calibrated."""
    usage: Usage
    """Usage summed over extraction, evidence retrieval and claims."""
    elapsed_s: float = Field(ge=0)
    """Wall time."""
    meta: RunMeta
    """Reproducibility record."""

    def usage_by_model(self) -> dict[str, Usage]:
        """The usage per model: each debate turn's on the model that answered it, the rest (claims, queries,
        judges, turns that got no reply) on the run's `model`."""
        turns = (t for c in self.claims if c.debate is not None for s in c.debate.states for t in s.turns)
        by_model = {m: u for m, u in turns_by_model(turns).items() if m != self.meta.model}
        return {self.meta.model: self.usage.less(Usage.total(by_model.values())), **by_model}

    def models_said(self) -> str:
        """Its model, or its team's models each with its calls (a role on a model of its own), in a phrase."""
        used = {name: u for name, u in self.usage_by_model().items() if u.llm_calls or name == self.meta.model}
        if len(used) <= 1:
            return f"model: {self.meta.model}"
        return "models: " + ", ".join(f"{name} ({u.llm_calls} calls)" for name, u in used.items())

    def to_dataframe(self) -> pd.DataFrame:
        """One row per claim (pandas): the response's verdict and score, then the claim's label, severity, who
        decided it, its place in the response, the evidence count and the debate's path.

        Returns:
            The frame, with the task and the model in `frame.attrs`.
        """
        import pandas as pd

        rows = []
        for claim in self.claims:
            debate = claim.debate
            rows.append(
                {
                    "verdict": self.verdict,
                    "score": self.score,
                    "claim_id": claim.claim_id,
                    "claim": claim.text,
                    "status": claim.status,
                    "label": claim.label,
                    "factual": claim.factual,
                    "p_factual": claim.p_factual,
                    "error_severity": claim.error_severity,
                    "decided_by": claim.decided_by,
                    "spans": [(s.start, s.end) for s in claim.spans],
                    "evidence": len(claim.evidence),
                    "states": " > ".join(s.name for s in debate.states) if debate else None,
                    "rounds": debate.rounds if debate else None,
                    "consensus": debate.consensus if debate else None,
                    "stop_reason": debate.stop_reason if debate else None,
                    "failure": claim.failure.kind if claim.failure else None,
                    "reason": claim.reason,
                }
            )
        frame = pd.DataFrame(rows, columns=_CLAIM_COLUMNS)
        frame.attrs["task"] = self.task
        frame.attrs["model"] = self.meta.model
        return frame


_CLAIM_COLUMNS = [
    "verdict",
    "score",
    "claim_id",
    "claim",
    "status",
    "label",
    "factual",
    "p_factual",
    "error_severity",
    "decided_by",
    "spans",
    "evidence",
    "states",
    "rounds",
    "consensus",
    "stop_reason",
    "failure",
    "reason",
]
