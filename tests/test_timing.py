"""The suite's own timing: what a test starts is classified by its command line, and .ci/durations.py sums a junit
file's seconds by folder and by kind so that each table adds up to the run's total."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.helpers import ROOT
from tests.support.timing import process_kind, server_kind


def _durations() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_durations", ROOT / ".ci" / "durations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ([sys.executable, "-m", "debate.cli", "verify"], "debate command"),
        (["/usr/local/bin/debate", "serve"], "debate command"),
        (["git", "-C", "/src/markov-debate/debate", "rev-parse", "HEAD"], "other processes"),
        (["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/initdb", "-D", "x"], "PostgreSQL"),
        (["/usr/lib/postgresql/15/bin/pg_ctl", "-D", "/tmp/desk-pg/pgdata", "start"], "PostgreSQL"),
        ([sys.executable, "-m", "llama_cpp.server", "--model", "m.gguf"], "embedded model"),
        ([sys.executable, "-c", "from multiprocessing.spawn import spawn_main"], "worker processes (multiprocessing)"),
        (["/usr/bin/schemathesis", "run", "http://127.0.0.1:1/openapi.json"], "schemathesis"),
        (["/usr/bin/phoenix", "serve"], "Phoenix"),
        ([sys.executable, "-m", "pip", "install", "x"], "pip, mkdocs, pytest, inspect"),
        (["/bin/true"], "other processes"),
    ],
)
def test_a_process_is_classified_by_its_command_line(argv: list[str], kind: str) -> None:
    assert process_kind(argv) == kind


def test_an_in_process_server_is_classified_by_its_app() -> None:
    class App:
        def __init__(self, title: str) -> None:
            self.title = title

    assert server_kind(App("markov-debate audit desk")) == "desk (in process)"
    assert server_kind(App("markov-debate guard")) == "guard (in process)"
    assert server_kind(App("FastAPI")) == "scripted endpoint (in process)"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" time="{wall}">{cases}</testsuite></testsuites>"""


def _case(name: str, seconds: float, starts: str | None, cpu: float | None = None) -> str:
    classname, test = name.split("::")
    props = "".join(
        f'<property name="{key}" value="{value}"/>'
        for key, value in (("starts", starts), ("cpu", cpu))
        if value is not None
    )
    head = f'<testcase classname="{classname}" name="{test}" time="{seconds}">'
    return f"{head}<properties>{props}</properties></testcase>"


def test_each_table_adds_up_to_the_run_and_an_older_run_borrows_the_kinds(tmp_path: Path) -> None:
    durations = _durations()
    after = tmp_path / "after.xml"
    after.write_text(
        JUNIT.format(
            wall=9,
            cases=_case("tests.desk.test_a::test_one@tests/desk/test_a.py", 4, "PostgreSQL;desk (in process)", 3)
            + _case("tests.unit.engine.test_b::test_two[x@y]", 2, "nothing", 1.5)
            + _case("tests.test_c::test_three", 1, "hypothesis", 0.5),
        )
    )
    before = tmp_path / "before.xml"
    before.write_text(
        JUNIT.format(
            wall=20,
            cases=_case("tests.desk.test_a::test_one", 12, None)
            + _case("tests.unit.engine.test_b::test_two[x@y]", 5, None)
            + _case("tests.test_c::test_three", 3, None),
        )
    )
    out = _table_output(durations, after, before)
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    # the grouped test's "@group" suffix is not part of its id, a parameter's "@" is
    assert rows["PostgreSQL"] == "| PostgreSQL | 1 | 12 | - | 1 | 4 | 3 |"
    assert rows["tests/desk/"] == "| tests/desk/ | 1 | 12 | - | 1 | 4 | 3 |"
    assert rows["tests/unit/"] == "| tests/unit/ | 1 | 5 | - | 1 | 2 | 2 |"
    assert rows["tests/"] == "| tests/ | 1 | 3 | - | 1 | 1 | 0 |"
    assert rows["nothing"] == "| nothing | 1 | 5 | - | 1 | 2 | 2 |"
    assert out.count("| **all** | 3 | 20 | - | 3 | 7 | 5 |") == 2
    assert "before 20 s, after 9 s" in out
    assert "The suite took 9 s, 1% of the CI's 25-minute budget" in out


def _table_output(durations: ModuleType, after: Path, before: Path) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert durations.main([str(after), "--before", str(before)]) == 0
    return out.getvalue()
