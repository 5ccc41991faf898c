"""The results log and what is read from it: typed records, the resumable JSONL log, batches, data frames, monitoring
figures, RefChecker's output shape, the severity scale.
"""

from debate.results._batch import BatchError, BatchSummary, EndpointDownError, run_batch, settle_batch
from debate.results._finished import fields_sha256
from debate.results._frames import load_run
from debate.results._items import BatchItem, InputTooLongError, read_items, read_items_with_fields
from debate.results._jsonl import (
    OutputLock,
    ResultsLog,
    ResumeState,
    compact,
    run_ordered,
    scan_results,
)
from debate.results._monitoring import RagMonitoring, rag_monitoring
from debate.results._records import (
    TRANSIENT_ERROR_KINDS,
    ErrorInfo,
    ErrorRecord,
    FailOn,
    PredictionRecord,
    Record,
    ResultRecord,
    fails_on,
    parse_record,
    read_records,
    transient_failure,
)
from debate.results._refchecker import Aggregator, EvaluationRates, evaluation_rates, refchecker_item, write_refchecker
from debate.results._resume import (
    compact_keeping,
    count_pending,
    history_entries,
    history_path,
    record_at,
    refuse_other_finished,
)
from debate.results._settings import differences, setting_of
from debate.results._severity import SEVERITY, SEVERITY_KEY, severity_text

__all__ = [
    "SEVERITY",
    "SEVERITY_KEY",
    "TRANSIENT_ERROR_KINDS",
    "Aggregator",
    "BatchError",
    "BatchItem",
    "BatchSummary",
    "EndpointDownError",
    "ErrorInfo",
    "ErrorRecord",
    "EvaluationRates",
    "FailOn",
    "InputTooLongError",
    "OutputLock",
    "PredictionRecord",
    "RagMonitoring",
    "Record",
    "ResultRecord",
    "ResultsLog",
    "ResumeState",
    "compact",
    "compact_keeping",
    "count_pending",
    "differences",
    "evaluation_rates",
    "fails_on",
    "fields_sha256",
    "history_entries",
    "history_path",
    "load_run",
    "parse_record",
    "rag_monitoring",
    "read_items",
    "read_items_with_fields",
    "read_records",
    "record_at",
    "refchecker_item",
    "refuse_other_finished",
    "run_batch",
    "run_ordered",
    "scan_results",
    "setting_of",
    "settle_batch",
    "severity_text",
    "transient_failure",
    "write_refchecker",
]
