"""Runs as pandas DataFrames, for notebooks (a single report: `Report.to_dataframe`). pandas is imported only when a
frame is asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debate.errors import InputError
from debate.results._records import ErrorRecord, PredictionRecord, Record, read_records

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["load_run"]


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
