"""Schemathesis hooks for the desk's run (loaded through SCHEMATHESIS_HOOKS by tests/desk/test_schemathesis.py).

- application/x-ndjson: the published schema describes a JSON-lines body as the array of its lines; this sends it
  as one JSON value per line.
- A multipart upload's `file` is bytes to a schema, so a generated one is never a readable batch: a case meant to be
  valid carries a readable JSON line in it instead (text, so that it still validates as the schema's string), and
  its other form fields stay as generated. Generated items reach the same reader through the raw-body media types.
- What a task needs of `reference` (summarization: a document; rag: sources) is the task's own rule, published in
  the operation's description, not in the schema (it depends on the content of a string, or for a batch on a query
  parameter the body cannot refer to). A case meant to be valid that breaks it is sent with task qa instead (which
  takes any reference); tests/desk/test_desk_inputs.py holds those refusals to their 422. For a batch the desk's
  own reader decides (`read_upload`, every line as the desk checks it): a guess at one rule let a body through
  whose only line with an id was a rag line of plain texts. `map_case` rather than
  `filter_case`: the stateful phase maps its cases but does not filter them.
- A blank `response` is refused by its validator, which the schema cannot say (a `pattern` with a 200,000
  maxLength stops schemathesis from making any valid body; see markov_debate/desk/requests.py): a case meant to be
  valid gets a visible first character instead, an audit's and each batch line's. tests/desk/test_desk_api.py holds
  the blank one to its 422.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis import Case, HookContext

from debate.config import VerifierConfig
from debate.errors import InputError
from debate.plugins import TASKS, EstimatesWork, TaskInput
from debate.results import BatchItem
from markov_debate.desk.ingest import IngestError, read_upload
from tests.support.desk import settings_for

READABLE_ITEM: dict[str, Any] = {
    "id": "1",
    "response": "Paris is the capital [1].",
    "reference": {"1": "Paris is France's capital."},
}
"""An item every task reads (rag's sources with the id its citation names)."""
READABLE_LINE = json.dumps(READABLE_ITEM) + "\n"
_SETTINGS = settings_for("sqlite://", "http://127.0.0.1:9/v1")
"""As the fuzzed desk's (tests/desk/test_schemathesis.py): the same limits on items, claims and rounds."""


def _lines(value: Any) -> bytes:
    if isinstance(value, list):
        return b"".join(json.dumps(item).encode() + b"\n" for item in value)
    return json.dumps(value).encode()


@schemathesis.serializer("application/x-ndjson")
def ndjson(_: Any, value: Any) -> bytes:
    return _lines(value)


def _positive(case: Case[Any]) -> bool:
    return case.meta is not None and case.meta.generation.mode.is_positive


@schemathesis.hook("map_case")
def within_the_rules(_: HookContext, case: Case[Any]) -> Case[Any]:
    if not _positive(case) or case.method.upper() != "POST":
        return case
    if case.media_type == "multipart/form-data" and isinstance(case.body, dict):
        case.body = {**case.body, "file": READABLE_LINE}
    elif case.path == "/v1/audits" and isinstance(case.body, dict):
        case.body = _visible(case.body)
        if not _task_takes(str(case.body.get("task", "qa")), case.body):
            case.body = {**case.body, "task": "qa"}
    elif case.path == "/v1/batches" and case.media_type != "multipart/form-data" and not isinstance(case.body, list):
        # schemathesis 4.32's coverage phase makes a "valid" body of `0` for an array that `contains` a line: the
        # schema asks for an array, so the case gets the one readable line it promises
        case.body = [READABLE_ITEM]
    elif case.path == "/v1/batches" and isinstance(case.body, list):
        case.body = [_visible(line) if isinstance(line, dict) else line for line in case.body]
        task = str((case.query or {}).get("task", "qa"))
        if not _batch_readable(task, case.body, case.media_type):
            if _batch_readable("qa", case.body, case.media_type):
                case.query = {**(case.query or {}), "task": "qa"}
            else:
                # the coverage phase's arrays do not always hold the line `contains` asks for (a body of `[0]`
                # came as a valid case): add it, as the schema promises
                case.body = [*case.body, READABLE_ITEM]
    return case


def _batch_readable(task: str, body: list[Any], media_type: str | None) -> bool:
    """Whether the desk's own reader (`read_upload`, every line checked under `task` as a single submission is)
    finds a readable item in the body: the schema promises one such line, valid for task qa; whether another task
    takes it too is that task's rule, which the schema cannot say."""
    if task not in TASKS.names():
        return True  # an unknown task is the schema's to refuse, not this hook's to hide
    raw = _lines(body) if media_type == "application/x-ndjson" else json.dumps(body).encode()
    with tempfile.TemporaryDirectory() as folder:
        upload = Path(folder) / "upload"
        upload.write_bytes(raw)
        try:
            read_upload(upload, task=task, settings=_SETTINGS)
        except IngestError:
            return False
    return True


def _visible(item: dict[str, Any]) -> dict[str, Any]:
    """`item` with a blank `response` given a visible first character (same length: within maxLength still)."""
    response = item.get("response")
    if isinstance(response, str) and response and not response.strip():
        return {**item, "response": "x" + response[1:]}
    return item


def _task_takes(task: str, item: dict[str, Any]) -> bool:
    """Whether the task's own check passes the item (what the desk runs at submit, before any model call)."""
    if task not in TASKS.names():
        return True
    runner = TASKS.get(task)()
    if not isinstance(runner, EstimatesWork):
        return True
    try:
        batch_item = BatchItem(id="1", response=item.get("response") or "-", reference=item.get("reference"))
        runner.expected_work(
            TaskInput(response=batch_item.response, question=item.get("question"), reference=batch_item.evidence()),
            VerifierConfig(),
        )
    except (InputError, ValueError):
        return False
    return True
