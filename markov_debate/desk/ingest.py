"""Batch uploads, shared by the API (`POST /v1/batches`) and the upload form: parse, check each line with the same
rules as a single audit, queue the readable ones in one transaction.

`ingest` is blocking (file parsing, validation, a database transaction): the routes run it in a worker thread, so
a large or hostile upload never holds the event loop that answers `/v1/health` and every other request. Parsing
stops at `max_items + 1` records, so a junk upload of millions of lines is refused after reading one line more
than the limit, not after parsing all of it. The body's byte cap is enforced before this runs (BodyLimit).
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from debate.errors import InputError
from debate.results import BatchItem, InputTooLongError, read_items_with_fields
from markov_debate.desk.auth import Principal
from markov_debate.desk.models import BatchInfo
from markov_debate.desk.requests import AuditRequest, checked_request
from markov_debate.desk.runnable import check_runnable
from markov_debate.desk.settings import DeskSettings
from markov_debate.desk.store import Store

__all__ = ["IngestError", "ingest", "read_upload"]


class IngestError(InputError):
    """The upload as a whole cannot be queued: `status` is the HTTP status that says why (413 or 422)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


def ingest(
    path: Path,
    *,
    store: Store,
    principal: Principal,
    task: str,
    name: str,
    settings: DeskSettings,
    idempotency_key: str | None = None,
) -> tuple[BatchInfo, bool]:
    """Queue the upload at `path` as one batch; (the batch, created). Unreadable lines are listed in its
    `input_errors`. With an `idempotency_key` already used for these bytes, the first batch comes back (created
    False) and nothing is parsed or queued."""
    digest = None
    if idempotency_key is not None:
        digest = _digest(path, task)
        replayed = store.replayed_batch(principal, idempotency_key, digest)
        if replayed is not None:
            return store.batch(replayed), False
    items, errors = read_upload(path, task=task, settings=settings)
    batch_id, created = store.submit_batch(
        principal,
        name=name,
        task=task,
        items=items,
        input_errors=errors,
        idempotency_key=idempotency_key,
        digest=digest,
        max_pending=settings.key_max_pending,
    )
    return store.batch(batch_id), created


def read_upload(
    path: Path, *, task: str, settings: DeskSettings
) -> tuple[list[tuple[int, AuditRequest]], list[dict[str, Any]]]:
    """The upload's items as audit requests under `task` (each checked as a single submission is), and its
    unreadable lines, each named: what the desk queues and what it lists in `input_errors`. An upload past the
    line limit (413) or with no readable item (422) is an IngestError."""
    max_items = settings.max_batch_items
    try:
        # Every line counts toward the limit, blank or not: a body of newlines stops being read at the limit.
        records = list(itertools.islice(read_items_with_fields(path, max_lines=max_items), max_items + 1))
    except InputTooLongError:
        raise IngestError(
            f"the upload has more than {max_items} lines (blank ones count); the limit is {max_items}", status=413
        ) from None
    except InputError as exc:
        raise IngestError(str(exc).replace(str(path), "the upload"), status=422) from exc
    if len(records) > max_items:
        raise IngestError(f"the batch has more than {max_items} items; the limit is {max_items}", status=413)
    items: list[tuple[int, AuditRequest]] = []
    errors: list[dict[str, Any]] = []
    for line, item, fields, error in records:
        if item is None:
            errors.append({"line": line, "message": error})
            continue
        checked = _request(line, item, (fields or {}).get("overrides"), task, settings)
        if isinstance(checked, str):
            errors.append({"line": line, "message": checked})
        else:
            items.append((line, checked))
    if not items:
        detail = errors[0]["message"] if errors else "the upload has no items"
        raise IngestError(f"no readable item in the upload ({detail})", status=422)
    return items, errors


def _digest(path: Path, task: str) -> str:
    """What an Idempotency-Key is held to: the task and the upload's bytes (not its file name)."""
    digest = hashlib.sha256(task.encode() + b"\0")
    with path.open("rb") as upload:
        while chunk := upload.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _request(line: int, item: BatchItem, overrides: Any, task: str, settings: DeskSettings) -> AuditRequest | str:
    """The line as an audit request, checked as a single submission is (its own `overrides` too, applied to this
    desk's configuration); or the error naming its line and field."""
    try:
        request = AuditRequest.model_validate(
            {
                "task": task,
                "question": item.question,
                "response": item.response,
                "reference": item.reference,
                "claims": item.claims,
                **({"overrides": overrides} if overrides is not None else {}),
            }
        )
        try:
            config = request.overrides.apply(settings.verifier)
        except ValidationError as exc:
            return f"line {line}: overrides: {exc.errors()[0]['msg']}"
        checked_request(request, max_claims=settings.verifier.claims.max_claims)
        check_runnable(request, config, max_claim_chars=settings.max_claim_chars)
    except InputError as exc:
        return f"line {line}: {exc}"
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"line {line}: field {'.'.join(map(str, first['loc']))!r}: {first['msg']}"
    return request
