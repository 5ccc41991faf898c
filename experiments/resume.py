"""A resumed experiment run over its data as it is now: the items to predict again, and the records whose label
alone changed, rewritten (debate.results' rule for a results log, applied to predictions)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from debate.results import ResultsLog, ResumeState, fields_sha256, parse_record, record_at
from experiments.data import Item

__all__ = ["resume_items", "settled_ids"]


def resume_items(items: Iterator[Item], state: ResumeState, results_path: Path) -> Iterator[Item]:
    """The items a resumed run predicts: new ones, unfinished ones and those whose data changed since their record
    (the old record goes to the history at compaction); an item whose label alone changed has its record rewritten
    with the new label here, with no prediction."""
    with ResultsLog(results_path) as log:
        for item in items:
            entry = state.entries.get(item.id)
            if entry is None or entry.content_differs(item.content_sha256()):
                yield item
            elif entry.fields_differ(fields_sha256(item.source_line, {"label_factual": item.label_factual})):
                old = record_at(results_path, entry.offset)
                fresh = {**old, "label_factual": item.label_factual, "source_line": item.source_line}
                log.write_line(parse_record({**fresh, "input_sha256": item.content_sha256()}).to_json())


def settled_ids(state: ResumeState, items: Iterable[Item]) -> set[str]:
    """The ids of `items` whose record in `state` answers their data as it is now (the Ray backend's skip set: an
    item whose data changed is predicted again)."""
    settled = set()
    for item in items:
        entry = state.entries.get(item.id)
        if entry is not None and not entry.content_differs(item.content_sha256()):
            settled.add(item.id)
    return settled
