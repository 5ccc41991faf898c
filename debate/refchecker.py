"""RefChecker's output shape (amazon-science/RefChecker `refchecker-cli check`): each input item with `claims`,
`Y` (the response's label under the chosen aggregation) and `ys` (one label per claim).

Labels map as factual -> Entailment, non_factual -> Contradiction, not_enough_evidence -> Neutral. A claim whose
check failed has no label: RefChecker has none for it, so its `ys` entry is null, `failed_claims` counts it and `Y`
is null unless a Contradiction already decides `strict` (a failure is never reported as a label).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from debate.rollup import REFCHECKER_LABELS, refchecker_soft
from debate.types import ClaimVerdict, Report

__all__ = ["refchecker_item", "write_refchecker"]

_OURS = ("line", "line_sha256", "result", "error")


def _y(report: Report) -> str | dict[str, float] | None:
    if not report.claims:
        return None if report.failure is not None else "Abstain"
    if report.rollup == "soft":
        failed = any(c.label is None for c in report.claims)
        return None if failed else refchecker_soft(report.claims)
    # any-false is strict under our labels; strict and major verdicts are claim labels (or unverifiable: None).
    return next((name for label, name in REFCHECKER_LABELS.items() if label == report.verdict), None)


def _claim(claim: ClaimVerdict) -> str | list[str]:
    return list(claim.triplet) if claim.triplet is not None else claim.text


def refchecker_item(record: dict[str, Any]) -> dict[str, Any]:
    """One results-log record (`debate verify --input ... --output`) in RefChecker's shape."""
    item = {key: value for key, value in record.items() if key not in _OURS}
    if item.pop("id_from_index", False):
        item.pop("id", None)
    if "result" not in record:
        error = record.get("error", {"kind": "unknown", "message": "no result"})
        return {**item, "Y": None, "ys": [], "error": error}
    report = Report.model_validate(record["result"])
    if "claims" not in item:
        item["claims"] = [_claim(c) for c in report.claims]
    ys = [REFCHECKER_LABELS[c.label] if c.label is not None else None for c in report.claims]
    out = {**item, "Y": _y(report), "ys": ys}
    failed = [c.claim_id for c in report.claims if c.label is None]
    if failed:
        out["failed_claims"] = failed
    if report.failure is not None:
        out["error"] = {"kind": report.failure.kind, "message": report.failure.message}
    return out


def write_refchecker(records: Iterable[dict[str, Any]], path: Path) -> int:
    """Write the records as one JSON array (RefChecker's file format), atomically. Returns the item count."""
    items = [refchecker_item(r) for r in records]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return len(items)
