"""The names and labels the models use: registered names are open to plugins, labels are closed sets."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

__all__ = [
    "CitationVariant",
    "ClaimKind",
    "ClaimLabel",
    "ClaimStatus",
    "DecidedBy",
    "EvidenceKind",
    "GroundingBand",
    "Name",
    "PrefilterName",
    "ReportVerdict",
    "RiskLevel",
    "Role",
    "RollupName",
    "StateName",
    "StopReason",
    "StopRule",
    "StopSetting",
    "TaskName",
    "parse_stop",
    "stop_kind",
]

Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.\-]*$", max_length=64)]
"""A registered name (task, role, state, prefilter, rollup): open to plugins, so checked against its registry
where it is configured rather than listed here."""

CitationVariant = Literal["seed", "occurrences"]
"""seed (default): the RAG rules exactly: the bracket's whole content, unstripped, is one id (`[S0, S1]` is one
id, and an invalid one), sentences are split at every run of . ! ?, the ratio counts distinct valid ids, and the
report keeps the first 3 uncited sentences cut to 100 characters. occurrences (a named departure): `[a, b]` cites
two ids, stripped; the abbreviation-aware sentence splitter; every valid occurrence counts."""

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
StopReason = Literal["no_debate", "consensus", "max_rounds", "failed", "posterior", "out_of_reach", "unseen"]
ReportVerdict = Literal["factual", "non_factual", "not_enough_evidence", "unverifiable", "no_claims"]
RiskLevel = Literal["none", "low", "moderate", "high"]
GroundingBand = Literal["supported", "minor extrapolation", "suspicious", "likely hallucination"]

FailureKind = Literal[
    "usage",
    "input",
    "model_unavailable",
    "model_rejected",
    "reply_unusable",
    "evidence_unavailable",
    "extraction_failed",
    "context_too_long",
    "internal",
    "deferred",
]
"""What went wrong, as recorded in a `Failure`; `deferred` is no fault: the claim's debate runs later (a guard's
`--debate later`), so it has no verdict yet."""


StopRule = Literal["consensus"] | float
"""The paper's rule ("consensus": agreement after min_rounds, or max_rounds) or the posterior stop's threshold."""

_STOP = re.compile(r"^(?P<kind>posterior|cascade|voi):(?P<p>0?\.\d+|1\.0*|0|1)$")


def parse_stop(value: str) -> StopRule:
    """ "consensus", or "posterior:P", "cascade:P" or "voi:P" with P in (0.5, 1): the threshold.

    Raises:
        ValueError: anything else, with what is accepted.
    """
    if value == "consensus":
        return "consensus"
    match = _STOP.match(value.strip())
    threshold = float(match.group("p")) if match else None
    if threshold is None or not 0.5 < threshold < 1:
        raise ValueError(
            f"{value!r}: give consensus (the paper's rule), posterior:P, cascade:P or voi:P with P in (0.5, 1)"
        )
    return threshold


StopKind = Literal["consensus", "posterior", "cascade", "voi"]


def stop_kind(value: str) -> StopKind:
    """Which rule a stop setting names (checked by `parse_stop`)."""
    parse_stop(value)
    if value == "consensus":
        return "consensus"
    kind = value.strip().split(":", 1)[0]
    return "cascade" if kind == "cascade" else "voi" if kind == "voi" else "posterior"


def _stop_setting(value: str) -> str:
    rule = parse_stop(value)
    return value if rule == "consensus" else f"{stop_kind(value)}:{rule!r}"


StopSetting = Annotated[str, AfterValidator(_stop_setting)]
"""A stop rule as configured: "consensus", "posterior:P", "cascade:P" or "voi:P" (normalised)."""
