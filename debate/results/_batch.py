"""JSONL batches: streamed, in input order, resumable after any interruption (kill -9 included), one writer per
output. A re-run redoes what did not finish (transient failures, input lines fixed since) and ends with exactly one
record per input line, in input order."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debate.errors import (
    BatchError,
    DebateError,
    EndpointDownError,
    InputError,
    ModelRequestError,
    UsageError,
)
from debate.plugins import TaskInput
from debate.results._gate import LogTally, tally_log
from debate.results._items import BatchItem, Work, read_keyed
from debate.results._jsonl import OutputLock, ResultsLog, ResumeState, run_ordered, scan_results
from debate.results._records import ErrorInfo, ErrorRecord, FailOn, Record, ResultRecord
from debate.results._resume import Retired, classify, compact_keeping, history_path, retire, write_updates
from debate.results._settings import setting_of, shown_differences
from debate.types import Report, Usage

if TYPE_CHECKING:
    from debate.pipeline import Verifier

__all__ = [
    "BatchError",
    "BatchSummary",
    "EndpointDownError",
    "run_batch",
    "settle_batch",
]

log = logging.getLogger(__name__)


@dataclass
class BatchSummary:
    """What a batch run did."""

    processed: int = 0
    skipped_done: int = 0
    redone: int = 0
    """Items processed again: their earlier record was a transient failure or an input error since fixed."""
    errors: int = 0
    failed: int = 0
    """Responses whose claims could not be obtained (a typed failure in the report)."""
    factual: int = 0
    non_factual: int = 0
    not_enough_evidence: int = 0
    no_claims: int = 0
    """Responses with nothing checkable: neither checked nor unverifiable."""
    unverifiable: int = 0
    dropped: int = 0
    """Superseded records removed when the output was compacted."""
    usage: Usage = field(default_factory=Usage)
    """Model usage of the records written in this run."""
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    """The same usage per model (a team may have a model per role; see Report.usage_by_model)."""
    cascade: dict[str, tuple[int, dict[str, Usage]]] = field(default_factory=dict)
    """Under the cascade stop, per team: the claims it decided, and its turns' usage by model."""
    undecided: int = 0
    """Under the cascade stop: claims no team decided before the list ended."""
    stopped: str | None = None
    """Why the batch stopped before its end (the cost gate), if it did."""
    unfinished: int = 0
    """Records a transient failure left unfinished (redone on a re-run)."""
    last_failure: str | None = None
    """The last such record's failure."""
    changed: int = 0
    """Lines whose content changed since their record: verified again (the old record kept in the history)."""
    labels_updated: int = 0
    """Records whose label alone changed: updated without a debate."""
    updated: int = 0
    """Records whose other carried fields or line number alone changed: updated without a debate."""
    setting_redone: int = 0
    """Records made with other settings, redone under --redo."""
    gone: int = 0
    """Records whose input line is gone: moved to the log's history, out of the log and its counts."""
    history: Path | None = None
    """The log's history (debate.results._resume.history_path), when a record was moved there."""
    kept: int = 0
    """Records this run moved to the history (superseded, gone, or all of them under --fresh)."""
    log: LogTally = field(default_factory=LogTally)
    """The log as it stands at the end, for every input line: checked or not, verdicts, --fail-on matches."""

    @property
    def no_model_answered(self) -> bool:
        """No model call of this run succeeded, and items were left unfinished for it: an endpoint that never
        answered usefully (down, or answering 200 with HTML), not a run whose verdicts stand."""
        return self.usage.llm_calls == 0 and self.unfinished > 0

    def _count_teams(self, report: Report) -> None:
        for claim in report.claims:
            teams = claim.debate.teams if claim.debate is not None else []
            for team in teams:
                decided, usage = self.cascade.get(team.name, (0, {}))
                for model, used in team.usage_by_model.items():
                    usage[model] = usage.get(model, Usage()) + used
                self.cascade[team.name] = (decided + int(team.decided and team is teams[-1]), usage)
            self.undecided += int(bool(teams) and not teams[-1].decided)

    def add(self, record: Record) -> None:
        """Count one written record."""
        self.processed += 1
        if isinstance(record, ResultRecord):
            self.usage = self.usage + record.result.usage
            for model, used in record.result.usage_by_model().items():
                self.usage_by_model[model] = self.usage_by_model.get(model, Usage()) + used
            self._count_teams(record.result)
        if isinstance(record, ErrorRecord):
            self.errors += 1
        elif isinstance(record, ResultRecord) and record.result.failure is not None:
            self.failed += 1
        elif record.verdict == "factual":
            self.factual += 1
        elif record.verdict == "non_factual":
            self.non_factual += 1
        elif record.verdict == "no_claims":
            self.no_claims += 1
        elif record.verdict == "not_enough_evidence":
            self.not_enough_evidence += 1
        else:
            self.unverifiable += 1
        if not record.is_final:
            self.unfinished += 1
            self.last_failure = record.failure_message


async def run_batch(
    *,
    verifier: Verifier,
    input_path: Path,
    output_path: Path,
    items_in_flight: int,
    task: str = "qa",
    retry_failed: bool = True,
    max_consecutive_failures: int = 5,
    fail_on: FailOn | None = None,
    on_record: Callable[[Record], None] | None = None,
    workers: int = 1,
    gate: Callable[[BatchItem | None, BatchSummary], str | None] | None = None,
    redo: bool = False,
    fresh: bool = False,
) -> BatchSummary:
    """Verify every line of `input_path` not yet finished in `output_path`, appending results in input order, then
    compact the output to one record per input line.

    `items_in_flight` bounds the responses in progress; model calls are bounded by the client's own limit. After
    `max_consecutive_failures` items in a row fail for a transient reason, EndpointDownError stops the batch
    (finished records are kept; a re-run resumes). `workers` > 1 runs the items on that many processes sharing the
    started `verifier`'s endpoint (see debate.workers); the output is the same. `gate` is asked before each item
    starts (with what is written so far); when it gives a reason, no further item starts and the reason is the
    summary's `stopped` (the cost limit: see debate.cli.cost)."""
    summary = BatchSummary()
    with OutputLock(output_path):
        if fresh:
            _start_over(output_path, summary)
        on_written = _EndpointWatch(summary, max_consecutive_failures, on_record)
        handler = functools.partial(_line_handler, input_path.name, task)
        job = verifier.job(workers, handler)
        state = scan_results(output_path, retry_failed=retry_failed)
        other = _same_settings(state, output_path, verifier, task, redo=redo)
        updated = _update_in_place(input_path, output_path, state, summary)
        first = True
        while True:
            if updated or not first:  # the log changed since it was read
                state = scan_results(output_path, retry_failed=retry_failed and first)
            before = summary.processed
            works = _pending(input_path, state, summary, gate, count=first, other=other)
            records = run_ordered(
                works, handler(verifier), output=output_path, limit=items_in_flight, on_record=on_written, job=job
            )
            async for _ in records:
                pass
            # The gate stopped this pass while items were still running; they have all finished now, so the next
            # item may fit after all: another pass asks it again (and stops at once when it does not).
            if summary.stopped is None or summary.processed == before:
                break
            summary.stopped, first = None, False
        _compact(input_path, output_path, summary, fail_on)
    return summary


def settle_batch(
    input_path: Path, output_path: Path, *, retry_failed: bool = True, fail_on: FailOn | None = None
) -> BatchSummary:
    """A batch with nothing left to verify (count_pending said so): its label and field updates, and its
    compaction (records whose line is gone to the history), with no model."""
    summary = BatchSummary()
    with OutputLock(output_path):
        state = scan_results(output_path, retry_failed=retry_failed)
        _update_in_place(input_path, output_path, state, summary)
        _compact(input_path, output_path, summary, fail_on)
    return summary


def _start_over(output: Path, summary: BatchSummary) -> None:
    """--fresh: every record of the log to its history, the log emptied."""
    if not output.exists():
        return
    retired = Retired()
    scan_results(output)  # drops a torn last line
    history = history_path(output)
    with output.open("rb") as fh:
        retire(history, ((raw, "fresh start") for raw in fh if raw.strip()), retired)
    if retired.fresh:
        summary.history = history
        summary.kept += retired.fresh
    output.write_bytes(b"")


def _update_in_place(input_path: Path, output: Path, state: ResumeState, summary: BatchSummary) -> int:
    """Rewrite the records whose label, carried fields or line alone changed (no debate); how many."""
    with ResultsLog(output) as log:
        labels, other = write_updates(log, output, state, read_keyed(input_path))
    summary.labels_updated += labels
    summary.updated += other
    return labels + other


def _compact(input_path: Path, output: Path, summary: BatchSummary, fail_on: FailOn | None) -> None:
    """One record per input line, in input order; the final records this leaves out kept in the history; then the
    log's tally for the input's lines (what the gate reads)."""
    keys, lines = [], set()
    for work in read_keyed(input_path):
        keys.append(work.key)
        lines.add(work.line)
    summary.dropped, retired = compact_keeping(output, keys, lines)
    summary.gone = retired.gone
    if retired.gone or retired.superseded:
        summary.history = history_path(output)
        summary.kept += retired.gone + retired.superseded
    summary.log = tally_log(output, keys, fail_on)


def _same_settings(state: ResumeState, output: Path, verifier: Verifier, task: str, *, redo: bool) -> frozenset[int]:
    """Refuse to resume an output whose finished reports were made with other settings: the output would hold
    two configurations' verdicts under one name. With `redo`, the indices of those settings (their records are
    done again)."""
    current = setting_of(task, verifier.meta())
    count, found = state.other_settings(current)
    if count and not redo:
        raise UsageError(
            f"{output} holds {count} finished record(s) made with other settings ({shown_differences(found)}); "
            "resume with the options they were made with, take the new settings with --redo, or write to another "
            "--output"
        )
    return state.other_indices(current) if redo else frozenset()


def _pending(
    input_path: Path,
    state: ResumeState,
    summary: BatchSummary,
    gate: Callable[[BatchItem | None, BatchSummary], str | None] | None,
    *,
    count: bool,
    other: frozenset[int] = frozenset(),
) -> Iterator[Work]:
    """The input's work not finished in `state`, until the gate stops it (`count`: tally skipped and redone)."""
    for work in read_keyed(input_path):
        change = classify(work, state, other)
        if change in ("done", "update"):
            summary.skipped_done += count and change == "done"
            continue
        if gate is not None and (reason := gate(work.item, summary)) is not None:
            summary.stopped = f"stopped before line {work.line}: {reason}"
            return
        if count:
            _tally(change, work, state, summary)
        yield work


def _tally(change: str, work: Work, state: ResumeState, summary: BatchSummary) -> None:
    line_key = f"line:{work.line}"  # an earlier error record for this line: the line was fixed
    if change == "changed" and work.item is not None:
        summary.changed += 1
    elif change == "setting":
        summary.setting_redone += 1
    elif change in ("redo", "changed") or line_key in state.final or line_key in state.redo:
        summary.redone += 1


class _EndpointWatch:
    """Counts each written record, and stops the batch when too many items in a row failed for a transient
    reason (the endpoint is down: going on would only fail the rest)."""

    def __init__(self, summary: BatchSummary, limit: int, on_record: Callable[[Record], None] | None) -> None:
        self.summary, self.limit, self.on_record = summary, limit, on_record
        self.consecutive = 0

    def __call__(self, record: Record) -> None:
        self.summary.add(record)
        if self.on_record is not None:
            self.on_record(record)
        self.consecutive = 0 if record.is_final else self.consecutive + 1
        if self.consecutive >= self.limit:
            raise EndpointDownError(
                f"{self.consecutive} items in a row failed because the endpoint is unavailable (last: "
                f"{record.failure_message or 'unknown'}); finished records are kept; re-run to resume"
            )


async def _process(verifier: Verifier, input_name: str, task: str, work: Work) -> Record:
    """One input line's record: its report, or an error record naming the line."""
    base: dict[str, Any] = dict(work.raw or {})

    def error(kind: str, message: str) -> ErrorRecord:
        sha = work.sha if kind == "input" else None
        info = ErrorInfo(kind=kind, message=message)
        return ErrorRecord.model_validate({**base, "line": work.line, "error": info, "line_sha256": sha})

    if work.item is None:
        return error("input", work.error or f"line {work.line}: unreadable")
    try:
        report = await verifier.verify(
            TaskInput(
                work.item.response,
                question=work.item.question,
                reference=work.item.evidence(),
                reference_source=f"{input_name}:{work.line}:reference",
                claims=work.item.claim_texts(),
                id=work.item.id,
            ),
            task=task,
        )
    except InputError as exc:
        return error("input", f"line {work.line}: {exc}")
    except ModelRequestError as exc:
        if exc.fatal:
            raise BatchError(
                f"the endpoint refuses every request ({exc}); finished records are kept", status=exc.status
            ) from exc
        return error(exc.kind, f"line {work.line}: {exc}")
    except DebateError as exc:
        return error(exc.kind, f"line {work.line}: {exc}")
    return ResultRecord.model_validate(
        {**base, "line": work.line, "result": report, "input_sha256": work.item.content_sha256()}
    )


def _line_handler(input_name: str, task: str, verifier: Verifier) -> Callable[[Work], Awaitable[Record]]:
    return functools.partial(_process, verifier, input_name, task)
