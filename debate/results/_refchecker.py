"""RefChecker's output shape (amazon-science/RefChecker `refchecker-cli check`): each input item with
`claims`, `Y` (the response's label under the chosen aggregator, `soft` by default as in RefChecker) and `ys` (one
label per claim), and RefChecker's evaluation metric over a file (`evaluation_rates`).

Labels map as factual -> Entailment, non_factual -> Contradiction, not_enough_evidence -> Neutral (our paper
prompt set is binary like the paper: Neutral needs `--prompt-set refchecker`). A claim whose check failed has no
label: RefChecker has none for it, so its `ys` entry is null, `failed_claims` counts it and `Y` is null unless a
Contradiction already decides `strict` (a failure is never reported as a label). A response with no claims is
RefChecker's Abstain: `"Abstain"` under strict and major, `{"Abstain": 1.0, ...}` under soft.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.errors import InputError
from debate.results._records import ErrorRecord, Record, ResultRecord
from debate.rollup import REFCHECKER_LABELS, refchecker_soft, roll_up
from debate.types import ClaimVerdict, Report

__all__ = ["Aggregator", "EvaluationRates", "evaluation_rates", "refchecker_item", "write_refchecker"]

Aggregator = Literal["strict", "soft", "major"]
"""RefChecker's `--aggregator_name` (default soft)."""

# Response verdicts that are claim labels read as their RefChecker names; any other verdict has none.
_BY_VERDICT: dict[str, str] = {str(label): name for label, name in REFCHECKER_LABELS.items()}


def _y(report: Report, aggregator: Aggregator) -> str | dict[str, float] | None:
    if not report.claims:
        if report.failure is not None:
            return None
        return refchecker_soft([]) if aggregator == "soft" else "Abstain"
    if aggregator == "soft":
        failed = any(c.label is None for c in report.claims)
        return None if failed else refchecker_soft(report.claims)
    # Under our labels RefChecker's strict is the paper's any-false; an unverifiable verdict has no name (None).
    return _BY_VERDICT.get(roll_up(report.claims, rule=aggregator).verdict)


def _claim(claim: ClaimVerdict) -> str | list[str]:
    return list(claim.triplet) if claim.triplet is not None else claim.text


def refchecker_item(record: Record, aggregator: Aggregator = "soft") -> dict[str, Any]:
    """One results-log record (`debate verify --input ... --output`) in RefChecker's shape."""
    item = dict(record.model_extra or {})
    if item.pop("id_from_index", False):
        item.pop("id", None)
    if isinstance(record, ErrorRecord):
        return {**item, "Y": None, "ys": [], "error": record.error.model_dump()}
    if not isinstance(record, ResultRecord):
        raise InputError(f"{record.key}: an experiment's prediction has no claims to write in RefChecker's format")
    report = record.result
    if "claims" not in item:
        item["claims"] = [_claim(c) for c in report.claims]
    ys = [REFCHECKER_LABELS[c.label] if c.label is not None else None for c in report.claims]
    out = {**item, "Y": _y(report, aggregator), "ys": ys}
    failed = [c.claim_id for c in report.claims if c.label is None]
    if failed:
        out["failed_claims"] = failed
    if report.failure is not None:
        out["error"] = {"kind": report.failure.kind, "message": report.failure.message}
    return out


class EvaluationRates(BaseModel):
    """RefChecker's evaluation metric as its benchmark/evaluation/evaluate.py computes it (RefChecker's README,
    "Evaluation
    Metric"): each label's share of a response's claims, averaged over the responses that have claims; a response
    with no claims abstains, and the abstain rate is the share of abstaining responses among all counted. A claim
    label other than the three (ours: none, for a failed check) counts as Neutral, as that script counts it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rates: dict[str, float | None]
    """Entailment, Neutral and Contradiction averaged over the responses with claims (None when no response has
    any), and Abstain: the share of the counted responses with no claims."""
    responses: int = Field(ge=0)
    """Responses counted (with claims or abstaining)."""
    abstained: int = Field(default=0, ge=0)
    """Counted responses with no claims."""
    unlabelled_claims: int = Field(default=0, ge=0)
    """Claims with no label of the three (a failed check), counted as Neutral as RefChecker's script does."""
    excluded: int = Field(ge=0)
    """Items left out: an error (the response was not checked), which RefChecker's script has no notion of."""


_LABELS = ("Entailment", "Neutral", "Contradiction")


def evaluation_rates(items: Iterable[dict[str, Any]]) -> EvaluationRates:
    """The metric over RefChecker-shaped items (`refchecker_item` output or RefChecker's own, by their `ys`)."""
    shares: dict[str, list[float]] = {label: [] for label in _LABELS}
    counted = abstained = unlabelled = excluded = 0
    for item in items:
        ys = item.get("ys")
        if item.get("error") is not None or not isinstance(ys, list):
            excluded += 1
            continue
        counted += 1
        if not ys:
            abstained += 1
            continue
        # An "Abstain" entry is a label like any other unknown one to the script: Neutral.
        named = [y if y in _LABELS else "Neutral" for y in ys]
        unlabelled += sum(1 for y in ys if y is None)
        for label in _LABELS:
            shares[label].append(named.count(label) / len(named))
    rates: dict[str, float | None] = {
        label: (sum(values) / len(values) if values else None) for label, values in shares.items()
    }
    rates["Abstain"] = abstained / counted if counted else None
    return EvaluationRates(
        rates=rates, responses=counted, abstained=abstained, unlabelled_claims=unlabelled, excluded=excluded
    )


def write_refchecker(records: Iterable[Record], path: Path, aggregator: Aggregator = "soft") -> EvaluationRates:
    """Write the records as one JSON array (RefChecker's file format), atomically. Returns the file's rates."""
    items = [refchecker_item(r, aggregator) for r in records]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return evaluation_rates(items)
