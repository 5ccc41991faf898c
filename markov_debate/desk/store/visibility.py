"""What a submitter is not shown of the desk's own infrastructure: which worker (host name and process id) ran an
audit, and the model endpoint's address, wherever they appear (the trail's actors and details, error texts, a
report's run record). Reviewers and admins run the desk and see them; a submitter only sends work to it."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["HIDDEN", "WORKER_KINDS", "hidden_in_report", "hidden_in_text"]

HIDDEN = "(not shown to submitters)"
WORKER_KINDS = frozenset({"claimed", "requeued", "deferred", "finished", "failed", "discarded"})
"""Trail entries a worker writes: its name (host:pid:tag) is the actor."""

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()]+", re.IGNORECASE)
_WORKER = re.compile(r"\b[\w.-]+:\d+:[0-9a-f]{4}\b")
_HOST_PORT = re.compile(
    r"(?<![\w.:-])(?:\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?|\[[0-9a-f:.]+\](?::\d{1,5})?|"
    r"(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{1,5})(?![\w.-])",
    re.IGNORECASE,
)
"""An address without a scheme, as connection errors print it: an IP (with or without its port), a host:port."""


def hidden_in_text(text: str | None) -> str | None:
    """`text` with URLs and worker names replaced."""
    if not text:
        return text
    text = _WORKER.sub("a worker", _URL.sub("[the model endpoint]", text))
    return _HOST_PORT.sub("[the model endpoint]", text)


def hidden_in_report(report_json: str) -> str:
    """The stored report with the endpoint's address taken out of its run record (`meta`)."""
    report: dict[str, Any] = json.loads(report_json)
    meta = report.get("meta")
    if isinstance(meta, dict):
        _hide_addresses(meta)
    return json.dumps(report, ensure_ascii=False)


def _hide_addresses(node: Any) -> None:
    """Every endpoint address in a run record, wherever it sits: `[model]`'s, each role's and cascade team's
    (`config`), and each role's model identity (`team`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("base_url", "endpoint") and isinstance(value, str) and value:
                node[key] = HIDDEN
            else:
                _hide_addresses(value)
    elif isinstance(node, list):
        for value in node:
            _hide_addresses(value)
