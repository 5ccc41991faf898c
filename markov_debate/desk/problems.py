"""What the API answers when it cannot do what was asked: one error model for every operation, documented once in
the OpenAPI document (the app passes ERROR_RESPONSES to every route)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["ERROR_RESPONSES", "FieldProblem", "Problem"]


class FieldProblem(BaseModel):
    """One field a request got wrong."""

    loc: list[str | int]
    """Where: body, query, path or header, then the field's path."""
    msg: str
    """What is wrong with it."""
    type: str
    """pydantic's error type (e.g. missing, literal_error)."""


class Problem(BaseModel):
    """Every error the API answers with: `detail` says what went wrong in one line, naming the field or the item;
    a 409 adds what it conflicts with (`id` and `status` of an audit, or a claim's `current_label` and
    `reviewed_by`)."""

    model_config = ConfigDict(extra="allow")

    detail: str
    """What went wrong."""
    errors: list[FieldProblem] | None = None
    """422: every field that is wrong."""


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "The body cannot be read (not UTF-8, not JSON, nested too deeply)."},
    401: {"model": Problem, "description": "No key, or a key this desk does not know."},
    403: {"model": Problem, "description": "The key's role may not do this, or the form's origin is another site."},
    404: {"model": Problem, "description": "No such audit, batch or claim (or not the caller's own)."},
    409: {"model": Problem, "description": "It conflicts with the stored state (a review on a stale view, ...)."},
    413: {"model": Problem, "description": "The body is larger than the desk takes."},
    422: {
        "model": Problem,
        "description": "A field is wrong; `errors` names each. Text holding a NUL character or a lone surrogate is "
        "refused too (no store keeps it), as is what a task or this desk's configuration refuses (summarization "
        "without a document, rag without sources, a claim past max_claim_chars): `detail` names the field.",
    },
    429: {
        "model": Problem,
        "description": "Too many: failed sign-ins from this client, this key's submissions a minute or audits "
        "waiting, or uploads being read; Retry-After says when to try again.",
    },
    503: {"model": Problem, "description": "The audit store cannot serve the request now; try again shortly."},
}
"""The error statuses every API operation may answer with, documented once for the OpenAPI document."""
