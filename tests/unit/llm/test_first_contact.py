"""What a first contact reads: the embedded model's first start says it is the first (a start of another model
file is not its last start), and the verdict box ends with where to go next."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from debate.cli.render import NEXT_STEP, render_report
from debate.llm import _embedded
from debate.testing import sample_report


def test_the_first_start_of_a_model_file_says_it_is_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one, other = tmp_path / "one.gguf", tmp_path / "other.gguf"
    one.write_bytes(b"a" * 10)
    other.write_bytes(b"b" * 20)
    monkeypatch.setattr(_embedded, "embedded_model_path", lambda: one)
    assert _embedded.start_note(_embedded._last_start_s()).startswith("its first start on this machine")
    _embedded._record_start_s(2.4)
    assert _embedded.start_note(_embedded._last_start_s()) == "takes ~2 s (the last start here)"
    monkeypatch.setattr(_embedded, "embedded_model_path", lambda: other)  # a test's stand-in, another version
    assert _embedded._last_start_s() is None


def test_the_verdict_box_ends_with_the_next_step_on_the_embedded_model() -> None:
    report = sample_report(["factual"])
    embedded = report.model_copy(update={"meta": report.meta.model_copy(update={"embedded": True})})
    for shown, expected in ((embedded, True), (report, False)):
        out = io.StringIO()
        render_report(shown, Console(file=out, width=400, force_terminal=False), brief=True, next_step=True)
        box = out.getvalue().split("╰")[0]
        assert (NEXT_STEP in box) is expected
