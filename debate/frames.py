"""Reports and runs as pandas DataFrames, for notebooks. pandas is imported only when a frame is asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debate.errors import InputError
from debate.records import ErrorRecord, PredictionRecord, Record, read_records

if TYPE_CHECKING:
    import pandas as pd

    from debate.types import Report

__all__ = ["load_run", "report_frame"]


def report_frame(report: Report) -> pd.DataFrame:
    """One row per claim: the response's verdict and score, then the claim's label, severity, who decided it, its
    place in the response, the evidence count and the debate's path."""
    import pandas as pd

    rows = []
    for claim in report.claims:
        debate = claim.debate
        rows.append(
            {
                "verdict": report.verdict,
                "score": report.score,
                "claim_id": claim.claim_id,
                "claim": claim.text,
                "status": claim.status,
                "label": claim.label,
                "factual": claim.factual,
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
    frame.attrs["task"] = report.task
    frame.attrs["model"] = report.meta.model
    return frame


_CLAIM_COLUMNS = ["verdict", "score", "claim_id", "claim", "status", "label", "factual", "error_severity",
                  "decided_by", "spans", "evidence", "states", "rounds", "consensus", "stop_reason", "failure",
                  "reason"]  # fmt: skip


def load_run(path: str | Path) -> pd.DataFrame:
    """A run as a DataFrame, one row per item, without the full reports (they stay on disk):

    - a run folder of `debate eval` (`results.jsonl`): id, task, label_factual, pred_factual, score, decided_by,
      llm_calls, tokens, wall time and the verdict; its `config.json` and `metrics.json` go in `frame.attrs`;
    - a batch output of `debate verify --input ... --output FILE`: id, verdict, score, llm_calls, claims and the
      error of a bad line.
    """
    import pandas as pd

    path = Path(path)
    results = path / "results.jsonl" if path.is_dir() else path
    if not results.is_file():
        raise InputError(f"{path}: not a run folder (no results.jsonl) or a batch output file")
    rows = [_row(record) for record in read_records(results)]
    frame = pd.DataFrame(rows)
    if path.is_dir():
        for name in ("config", "metrics"):
            extra = path / f"{name}.json"
            if extra.is_file():
                frame.attrs[name] = json.loads(extra.read_text(encoding="utf-8"))
    return frame


def _row(record: Record) -> dict[str, Any]:
    extra = {k: v for k, v in (record.model_extra or {}).items() if not isinstance(v, dict | list)}
    if isinstance(record, PredictionRecord):
        row = record.model_dump(exclude={"report"}) | extra
        stored = record.report  # a Report's JSON, or a judge's transcript
        if isinstance(stored, dict):
            row["verdict"] = stored.get("verdict")
            row["claims"] = len(stored.get("claims") or [])
        return row
    row = {**extra, "line": record.line}
    if isinstance(record, ErrorRecord):
        row["error"] = record.error.message
        return row
    report = record.result
    row |= {"verdict": report.verdict, "claims": len(report.claims)}
    row.setdefault("score", report.score)
    row.setdefault("llm_calls", report.usage.llm_calls)
    return row
