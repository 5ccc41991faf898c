"""A results log's history survives a kill at any byte of an append (issue 83): the history as a kill leaves it
(every prefix of its last append, and of its digest index's) is read past its torn line, and the next retirement
cuts the fragment off, keeps each record once and never glues one to a fragment."""

from __future__ import annotations

import json
from pathlib import Path

from debate.results import history_entries
from debate.results._resume import Retired, retire


def _record(i: int) -> bytes:
    return (
        json.dumps({"id": f"q{i}", "line": i, "result": {"verdict": "factual", "note": "é" * (i % 3)}}).encode() + b"\n"
    )


def _ids(history: Path) -> list[str]:
    entries, _ = history_entries(history)
    return [e["record"]["id"] for e in entries]


def test_a_kill_at_every_byte_of_an_append_loses_and_glues_nothing(tmp_path: Path) -> None:
    whole = tmp_path / "whole.history.jsonl"
    retire(whole, [(_record(0), "line gone"), (_record(1), "superseded")], Retired())
    before = whole.read_bytes()
    retire(whole, [(_record(2), "line gone")], Retired())
    after = whole.read_bytes()
    assert _ids(whole) == ["q0", "q1", "q2"]
    index = Path(f"{whole}.index").read_bytes()
    for cut in range(len(before), len(after)):
        history = tmp_path / f"cut{cut}.history.jsonl"
        history.write_bytes(after[:cut])  # killed while writing record q2
        Path(f"{history}.index").write_bytes(index[: len(index) * cut // len(after)])  # and the index, part way
        entries, torn = history_entries(history)
        assert [e["record"]["id"] for e in entries] == ["q0", "q1"]
        assert torn == (1 if cut > len(before) else 0)
        retired = Retired()
        # the batch retires q2 again (its log was not rewritten) and then q3
        retire(history, [(_record(2), "line gone"), (_record(0), "line gone"), (_record(3), "superseded")], retired)
        assert (retired.gone, retired.superseded) == (1, 1)  # q0 was kept already: not twice
        assert _ids(history) == ["q0", "q1", "q2", "q3"]
        lines = history.read_bytes().split(b"\n")
        assert lines[-1] == b""
        assert all(json.loads(raw) for raw in lines[:-1]), "a record was glued to the torn line"
        assert history_entries(history)[1] == 0
        # the index agrees with the history it describes
        digests = {line.split()[0] for line in Path(f"{history}.index").read_text().splitlines()}
        entries, _ = history_entries(history)
        assert digests == {e["superseded"]["sha256"] for e in entries}


def test_an_index_that_does_not_fit_its_history_is_rebuilt(tmp_path: Path) -> None:
    history = tmp_path / "v.history.jsonl"
    retire(history, [(_record(0), "line gone")], Retired())
    Path(f"{history}.index").write_text("0" * 64 + " 999999\n")  # describes another, longer history
    retired = Retired()
    retire(history, [(_record(0), "line gone"), (_record(1), "line gone")], retired)
    assert retired.gone == 1 and _ids(history) == ["q0", "q1"]
    history.unlink()
    retire(history, [(_record(0), "line gone")], Retired())  # a history removed by hand starts again
    assert _ids(history) == ["q0"]
    assert len(Path(f"{history}.index").read_text().splitlines()) == 1
