"""Exports of finished audits, streamed: jsonl (request, report as stored, reviews), csv (one row per claim with its
latest review), refchecker (RefChecker's JSON array: claims, Y, ys)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from debate.results import ResultRecord, refchecker_item
from markov_debate.desk.store import Store, engine_label

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["EXPORT_MEDIA", "ExportFormat", "audit_lines", "export_stream"]

ExportFormat = Literal["jsonl", "csv", "refchecker"]
EXPORT_MEDIA: dict[str, tuple[str, str]] = {
    "jsonl": ("application/x-ndjson", "jsonl"),
    "csv": ("text/csv", "csv"),
    "refchecker": ("application/json", "json"),
}
"""Each format's media type and file suffix."""


def export_stream(store: Store, format: ExportFormat) -> Iterator[str]:
    """The export, piece by piece (the store is paged, never read whole)."""
    return {"jsonl": _export_jsonl, "csv": _export_csv, "refchecker": _export_refchecker}[format](store)


def audit_lines(url: str) -> Iterator[str]:
    """The jsonl export of the store at `url`, for a fit that reads the store directly (`debate dynamics fit --db
    URL`; the entry point `desk` of `markov_debate.stores`). A SQLite file that does not exist is refused: opening
    it would create an empty store, and the fit would find nothing to fit without saying why."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from debate.errors import UsageError

    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise UsageError(f"--db {url!r}: not a database URL (sqlite:///PATH, postgresql://...): {exc}") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).is_file():
        raise UsageError(f"--db: no desk store at {parsed.database} (the file does not exist)")
    shown = parsed.render_as_string(hide_password=True)
    try:
        missing = _missing_tables(parsed)
        if missing:
            # opening it as a store would add the desk's tables to somebody else's database (and, on SQLite,
            # change its mode): it is left as it was
            raise UsageError(
                f"--db {shown}: not a desk's store (no {', '.join(missing)} table{'s' if len(missing) > 1 else ''}); "
                "left untouched"
            )
        yield from _export_jsonl(Store(url))
    except SQLAlchemyError as exc:
        raise UsageError(f"--db {shown}: the store does not read ({type(exc).__name__}: {exc})") from None


_DESK_TABLES = ("alembic_version", "audits", "claims", "reviews")
"""The tables every desk's store has (its schema's first migration on)."""


def _missing_tables(parsed: URL) -> list[str]:
    """The desk's tables the database at `parsed` lacks, looked up without writing to it (SQLite opened
    read-only)."""
    from sqlalchemy import create_engine, inspect

    if parsed.get_backend_name() == "sqlite":
        database = Path(str(parsed.database)).resolve()
        engine = create_engine(f"sqlite:///file:{database}?mode=ro&uri=true")
    else:
        engine = create_engine(parsed)
    try:
        names = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    return [name for name in _DESK_TABLES if name not in names]


def _export_jsonl(store: Store) -> Iterator[str]:
    for row, reviews in store.export_rows():
        yield (
            json.dumps(
                {
                    "audit_id": row.id,
                    "submitted_by": row.submitted_by,
                    "created_at": row.created_at.isoformat() + "Z",
                    "request": json.loads(row.request_json),
                    "report": json.loads(row.report_json or "null"),
                    "reviews": [
                        {
                            "claim_id": r.claim_id,
                            "reviewer": r.reviewer,
                            "created_at": r.created_at.isoformat() + "Z",
                            "decision": r.decision,
                            "label": r.label,
                            "engine_label": r.engine_label,
                            "note": r.note,
                        }
                        for r in reviews
                    ],
                },
                ensure_ascii=False,
            )
            + "\n"
        )


_CSV_FIELDS = [
    "audit_id",
    "task",
    "verdict",
    "reviewed_verdict",
    "claim_id",
    "claim",
    "engine_label",
    "decided_by",
    "error_severity",
    "review_decision",
    "review_label",
    "reviewer",
    "reviewed_at",
    "review_note",
]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP, CSV injection)."""


def _cell(value: object) -> object:
    """A cell a spreadsheet shows as text, never runs: a text starting like a formula gets OWASP's leading single
    quote (numbers, such as a severity, are left as they are)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _export_csv(store: Store) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_CSV_FIELDS)
    writer.writeheader()
    for row, reviews in store.export_rows():
        latest = {r.claim_id: r for r in reviews}
        for claim in json.loads(row.report_json or "{}").get("claims", []):
            review = latest.get(claim["claim_id"])
            writer.writerow(
                {
                    key: _cell(value)
                    for key, value in {
                        "audit_id": row.id,
                        "task": row.task,
                        "verdict": row.verdict,
                        "reviewed_verdict": row.reviewed_verdict or "",
                        "claim_id": claim["claim_id"],
                        "claim": claim["text"],
                        "engine_label": engine_label(claim),
                        "decided_by": claim.get("decided_by", "debate"),
                        "error_severity": claim.get("error_severity"),
                        "review_decision": review.decision if review else "",
                        "review_label": review.label if review else "",
                        "reviewer": review.reviewer if review else "",
                        "reviewed_at": review.created_at.isoformat() + "Z" if review else "",
                        "review_note": review.note if review else "",
                    }.items()
                }
            )
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def _export_refchecker(store: Store) -> Iterator[str]:
    yield "["
    first = True
    for row, _ in store.export_rows():
        request = json.loads(row.request_json)
        fields = {k: request[k] for k in ("question", "response", "reference", "claims") if request.get(k) is not None}
        record = ResultRecord.model_validate(
            {"id": str(row.id), **fields, "result": json.loads(row.report_json or "null")}
        )
        yield ("" if first else ",\n") + json.dumps(refchecker_item(record), ensure_ascii=False)
        first = False
    yield "]\n"
