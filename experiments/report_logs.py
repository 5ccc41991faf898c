"""`debate report` over results logs (`debate verify --input ... --output`): each log's verdicts, failures and input
errors, whatever its task; the RAG rules' monitoring figures for the logs that hold RAG answers, with how many of
their records the figures leave out; and a RefChecker array given in place of its results log, named as such."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, get_args

from debate.errors import UsageError
from debate.results import (
    ErrorRecord,
    Record,
    ResultRecord,
    history_entries,
    history_path,
    parse_record,
    rag_monitoring,
    read_records,
)
from debate.types import ReportVerdict

__all__ = ["log_rows", "logs_table", "unique"]

VERDICTS: tuple[str, ...] = get_args(ReportVerdict)


def unique(paths: list[Path]) -> list[Path]:
    """`paths` in order, each file or folder once however it was written (`a.jsonl ./a.jsonl`)."""
    seen: set[Path] = set()
    kept = []
    for path in paths:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            kept.append(path)
    return kept


def _records(log: Path) -> list[Record]:
    with log.open("rb") as fh:
        start = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith(b"["):
        beside = Path(f"{log}.jsonl")
        where = f"; its results log is {beside}, beside it" if beside.is_file() else ""
        raise UsageError(
            f"{log}: a JSON array (RefChecker's format, `--output-format refchecker`), not a results log{where}"
        )
    try:
        return read_records(log)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{log}: cannot read it as a results log ({exc})") from exc


def _gone(log: Path, current: list[Record]) -> tuple[list[Record], int]:
    """The records of `log`'s history whose line is gone from its input (and not back since), latest first kept;
    and how many lines of the history are torn (a kill during an append; skipped)."""
    keys = {r.key for r in current}
    found: dict[str, Record] = {}
    entries, torn = history_entries(history_path(log))
    for entry in entries:
        if entry["superseded"].get("why") == "line gone":
            record = parse_record(entry["record"])
            if record.key is not None and record.key not in keys:
                found[record.key] = record
    return list(found.values()), torn


def log_rows(logs: list[Path], *, with_gone: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one summary row per log, one RAG monitoring row per log with RAG answers). The records whose input line is
    gone (kept in the log's history) are counted apart, and in the figures only `with_gone`."""
    summaries, monitoring = [], []
    for log in logs:
        records = _records(log)
        gone, torn = _gone(log, records)
        if with_gone:
            records = records + gone
        final = [r for r in records if r.is_final]
        results = [r for r in final if isinstance(r, ResultRecord)]
        verdicts: Counter[str] = Counter(str(r.result.verdict) for r in results if r.result.failure is None)
        tasks = Counter(r.result.task for r in records if isinstance(r, ResultRecord))
        summaries.append(
            {
                "log": str(log),
                "records": len(records),
                **{verdict: verdicts.get(verdict, 0) for verdict in VERDICTS},
                "failed": sum(1 for r in results if r.result.failure is not None),
                "input_errors": sum(1 for r in final if isinstance(r, ErrorRecord)),
                "unfinished": len(records) - len(final),
                "tasks": ", ".join(f"{task} {n}" for task, n in sorted(tasks.items())) or "-",
                "gone": len(gone),
                "gone_counted": with_gone,
                "history_torn": torn,
            }
        )
        figures = rag_monitoring(records)
        if figures.answers:
            monitoring.append({"log": str(log), **figures.model_dump()})
    return summaries, monitoring


def logs_table(summaries: list[dict[str, Any]], monitored: set[str]) -> str:
    """The logs' summary as markdown, and a line for each log without RAG answers (so no monitoring figures)."""
    columns = ["records", *VERDICTS, "failed", "input_errors", "unfinished", "tasks"]
    lines = [
        "\nResults logs (verdicts of the records that finished; failed: no verdict reached; unfinished: a transient "
        "failure left it undone, a re-run of the batch redoes it)\n",
        "| log | " + " | ".join(c.replace("_", " ") for c in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
        *(f"| {row['log']} | " + " | ".join(str(row[c]) for c in columns) + " |" for row in summaries),
    ]
    lines += [
        f"\n{row['log']}: {row['gone']} record(s) whose input line is gone (in its history), "
        + ("counted above" if row["gone_counted"] else "not counted (--with-gone counts them)")
        for row in summaries
        if row["gone"]
    ]
    lines += [
        f"\n{row['log']}: {row['history_torn']} torn line(s) in its history skipped (a run killed while appending; "
        "the records they held were kept in the log or retired again)"
        for row in summaries
        if row.get("history_torn")
    ]
    lines += [
        f"\n{row['log']}: no RAG answers (tasks: {row['tasks']}): no RAG monitoring figures"
        for row in summaries
        if row["log"] not in monitored
    ]
    return "\n".join(lines) + "\n"
