"""Sources given as a list of {id, text, parent_id}: read the same way by every task and by the batch reader (a
module of its own, so that reading a batch file imports no task)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from debate.errors import InputError, validation_problem
from debate.types import Evidence, Source

__all__ = ["read_sources"]


def read_sources(items: Sequence[object]) -> list[Source]:
    """A list of {id, text, parent_id} (or Source and Evidence objects) as sources, any task's (no check that there
    is one, or that any has text: task rag's own, in sources_from); InputError naming the source that is wrong."""
    try:
        return [
            s
            if isinstance(s, Source)
            else Source(id=s.source or "", text=s.text)
            if isinstance(s, Evidence)
            else Source.model_validate(s)
            for s in items
        ]
    except ValidationError as exc:
        raise InputError(f"reference: a source {validation_problem(exc)}") from exc
