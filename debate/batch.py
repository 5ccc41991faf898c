"""JSONL batches: streamed, in input order, resumable after any interruption (kill -9 included)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from debate.api import Verifier
from debate.errors import DebateError, InputError, ModelRequestError
from debate.jsonl import completed_keys, run_ordered
from debate.tasks.rag import sources_from

__all__ = ["BatchError", "BatchItem", "BatchSummary", "run_batch"]

log = logging.getLogger(__name__)


class BatchError(ModelRequestError):
    """The batch cannot proceed: the endpoint refuses every request (finished records are kept)."""


class BatchItem(BaseModel):
    """One input line, with RefChecker's field names. Other fields are carried through to the output."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    """Unique within the file; the resume key."""
    question: str | None = None
    """The question the response answers."""
    response: str = Field(min_length=1)
    """The text to check."""
    reference: str | dict[str, str] | list[dict[str, Any]] | None = None
    """Evidence: knowledge or document text; for task rag the sources ({id: text} or [{id, text, parent_id}])."""

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("response")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


@dataclass
class BatchSummary:
    """What a batch run did."""

    processed: int = 0
    skipped_done: int = 0
    errors: int = 0
    failed: int = 0
    """Responses whose claims could not be obtained (a typed failure in the report)."""
    factual: int = 0
    non_factual: int = 0
    unverifiable: int = 0


@dataclass
class _Work:
    line: int
    raw: dict[str, Any] | None
    item: BatchItem | None
    error: str | None


def _describe_validation(line: int, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(line)"
        parts.append(f"field {field!r}: {err['msg']}")
    return f"line {line}: " + "; ".join(parts)


def _read_input(path: Path) -> Iterator[_Work]:
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                yield _Work(number, None, None, f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(raw, dict):
                yield _Work(number, None, None, f"line {number}: expected a JSON object, got {type(raw).__name__}")
                continue
            try:
                yield _Work(number, raw, BatchItem.model_validate(raw), None)
            except ValidationError as exc:
                yield _Work(number, raw, None, _describe_validation(number, exc))


async def run_batch(
    *,
    verifier: Verifier,
    input_path: Path,
    output_path: Path,
    items_in_flight: int,
    task: str = "qa",
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> BatchSummary:
    """Verify every line of `input_path` not yet in `output_path`, appending results in input order.

    `items_in_flight` bounds the responses in progress; model calls are bounded by the client's own limit."""
    done = completed_keys(output_path)
    summary = BatchSummary()
    seen_ids: dict[str, int] = {}

    def pending() -> Iterator[_Work]:
        for work in _read_input(input_path):
            line_key = f"line:{work.line}"
            if line_key in done:
                summary.skipped_done += 1
                continue
            if work.item is not None:
                item_id = work.item.id
                first = seen_ids.setdefault(item_id, work.line)
                if first != work.line:
                    message = f"line {work.line}: duplicate id {item_id!r} (first on line {first})"
                    work = _Work(work.line, work.raw, None, message)
                elif item_id in done:
                    summary.skipped_done += 1
                    continue
            yield work

    async def process(work: _Work) -> dict[str, Any]:
        base: dict[str, Any] = dict(work.raw or {})

        def error(kind: str, message: str) -> dict[str, Any]:
            return {**base, "line": work.line, "error": {"kind": kind, "message": f"line {work.line}: {message}"}}

        if work.item is None:
            return {**base, "line": work.line, "error": {"kind": "input", "message": work.error}}
        try:
            reference = work.item.reference
            report = await verifier.verify(
                work.item.response,
                question=work.item.question,
                reference=sources_from(reference) if isinstance(reference, list) else reference,
                reference_source=f"{input_path.name}:{work.line}:reference",
                task=task,
            )
        except InputError as exc:
            return error("input", str(exc))
        except ModelRequestError as exc:
            if exc.fatal:
                raise BatchError(
                    f"the endpoint refuses every request ({exc}); finished records are kept", status=exc.status
                ) from exc
            return error(exc.kind, str(exc))
        except DebateError as exc:
            return error(exc.kind, str(exc))
        return {**base, "line": work.line, "result": report.model_dump(mode="json")}

    def count(record: dict[str, Any]) -> None:
        summary.processed += 1
        if "error" in record:
            summary.errors += 1
        elif record["result"].get("failure") is not None:
            summary.failed += 1
        else:
            verdict = record["result"]["verdict"]
            if verdict == "factual":
                summary.factual += 1
            elif verdict == "non_factual":
                summary.non_factual += 1
            else:
                summary.unverifiable += 1
        if on_record is not None:
            on_record(record)

    async for _ in run_ordered(pending(), process, output=output_path, limit=items_in_flight, on_record=count):
        pass
    return summary
