"""Wherever a severity is printed, it says what it means on the paper's 0-5 scale."""

from __future__ import annotations

import io

from rich.console import Console

from debate.cli.render import render_report
from debate.results import SEVERITY_KEY, severity_text
from debate.testing import sample_report


def test_severity_text_names_the_level() -> None:
    assert [severity_text(n) for n in (0, 4, 5)] == ["0/5 (no error)", "4/5 (severe)", "5/5 (made up)"]
    assert severity_text(None) == "-" and severity_text(9) == "9/5 (off the scale)"


def test_the_readable_report_explains_the_severity_column_and_line() -> None:
    out = io.StringIO()
    render_report(sample_report(["factual"]), Console(file=out, width=200, force_terminal=False))
    text = out.getvalue()
    assert SEVERITY_KEY in text and "0 no error, 1 minor, 2 moderate, 3 significant, 4 severe, 5 made up" in text
    assert "error severity: " in text and "/5 (" in text.split("error severity: ", 1)[1].splitlines()[0]


def test_brief_names_a_failed_claims_reason_and_its_calls() -> None:
    out = io.StringIO()
    render_report(sample_report(["factual", None]), Console(file=out, width=200, force_terminal=False), brief=True)
    text = out.getvalue()
    line = "claim 2 unverifiable (model_unavailable, debate): the endpoint was unavailable; 0 model call(s) answered"
    assert line + " for it (failed attempts are not counted)" in text
    assert "claim 1 unverifiable" not in text
