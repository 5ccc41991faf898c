"""Generated inputs at every door of the command line and the Python API (issue 43): text options of any length and
any script, files in any encoding with any bytes, numbers at and past their limits, wrong JSON types. The property
everywhere: a report, or one line naming the problem with a documented exit code; never a traceback, never a
half-written output. `debate` runs in-process (its `main`) against one scripted endpoint on 127.0.0.1. Each failure
hypothesis found is kept as an `@example`. `pytest --hypothesis-profile long` runs 8 times as many examples. Each
property states its correct outcome (the result a user reads), and the outcomes its examples must reach."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from debate import InputError, VerifierConfig, verify
from debate.cli import _main as run_command
from debate.cli.fields import FIELDS  # main() also installs process-wide signal hooks
from debate.config import ModelConfig
from debate.plugins import TaskInput
from debate.types import Report
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op
from tests.support.properties import Reached

DOCUMENTED = {0, 1, 2, 3, 5}
"""Exit codes a run without --max-cost may end with (docs/cli.md)."""


def _route(call: Call) -> Reply:
    if call.purpose == "extract":
        return Reply(content=json.dumps({"claims": ["The sky is blue on a clear day."]}))
    if call.purpose == "subjective_filter":
        return Reply(content=json.dumps({"text": "The sky is blue on a clear day."}))
    return Reply(content=op(True))


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with FakeOpenAI(routes={"*": _route}) as server:
        yield server.base_url


@dataclass
class Ran:
    code: int
    out: str
    err: str


def run(*argv: str, stdin: bytes = b"") -> Ran:
    """`debate ARGV` in-process, its stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_command(list(argv))
    except SystemExit as exc:  # argparse's own exit (a usage error, --help)
        code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved
    return Ran(code, out.getvalue(), err.getvalue())


def assert_handled(ran: Ran) -> None:
    """A report or one line naming the problem, with a documented exit code; never a traceback."""
    assert "Traceback" not in ran.err, ran.err[-3000:]
    assert ran.code in DOCUMENTED, (ran.code, ran.err[-2000:])
    if ran.code == 2:
        errors = [line for line in ran.err.splitlines() if line.startswith("debate") and "error:" in line]
        assert len(errors) == 1, ran.err[-2000:]


# Any Unicode an argument can carry: argv cannot hold NUL; a byte that is not UTF-8 reaches Python as a lone
# surrogate (surrogateescape), so lone surrogates are in.
_ARG_CHAR = st.characters(exclude_characters="\x00")
_SPECIAL = st.sampled_from(
    [
        "",
        " ",
        "-",
        "@",
        "@@literal",
        "@/nonexistent/file.txt",
        "@/tmp",
        "@/dev/null",
        "knowledge.txt",
        "word " * 60,  # a pasted paragraph: 300 characters, no line break (issue 43's first traceback)
        "x" * 5000,
        "\ufeffBOM first. Then text.",
        "line one.\r\nline two.\r\n",
        "מירושלים לתל אביב. ומשם לחיפה.",
        "باريس عاصمة فرنسا.",
        "巴黎是法国的首都。柏林是德国的首都。",
        "e\u0301\u0301\u0301 combining marks. \U0001f642 emoji.",
        "\udc80\udcff bytes that were not UTF-8",
        "\u202eright-to-left override",
    ]
)
TEXT = _SPECIAL | st.text(_ARG_CHAR, max_size=400) | st.text(_ARG_CHAR, min_size=300, max_size=3000)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=TEXT, answer=TEXT, evidence=TEXT, task=st.sampled_from(["qa", "summarization", "dialogue", "rag"]))
@example(question="q", answer="word " * 60, evidence="e", task="qa")
@example(question="q", answer="-", evidence="@@x", task="qa")
@example(question="", answer="-", evidence="\ud800", task="qa")  # found: a lone surrogate reached pydantic
@example(question="q", answer="The sky is blue.", evidence="", task="summarization")
def test_verify_takes_any_text_on_any_text_option(
    endpoint: str, question: str, answer: str, evidence: str, task: str, tmp_path: Path, reached: Reached
) -> None:
    """Correct outcome: the report of the answer given (its `response` is the text the option names, each claim's
    spans inside it), factual or without claims since the judge says true to every claim; or one line naming the
    option or field at fault, exit 2. At least a tenth of the examples get a report."""
    reached.require(report=0.1)
    argv = ["verify", "--task", task, "--question", question, "--answer", answer, "--evidence", evidence]
    if task == "rag":
        sources = tmp_path / "sources.json"
        sources.write_text(json.dumps({"S0": "The sky is blue."}))
        argv += ["--sources", str(sources)]
    stdin = "The sky is blue."
    ran = run(*argv, "--model.base-url", endpoint, "--model.model", "fake-model", "--json", stdin=stdin.encode())
    assert_handled(ran)
    if ran.code == 2:
        reached("refused")
        assert re.search(r"--(answer|question|evidence|sources|task)\b|response|reference|question", ran.err), ran.err
        return
    assert ran.code == 0, ran.err[-2000:]
    reached("report")
    report = Report.model_validate_json(ran.out)
    given = stdin if answer == "-" else answer[1:] if answer.startswith("@@") else answer
    if not answer.startswith("@") or answer.startswith("@@"):
        assert report.response == given.removeprefix("\ufeff").replace("\r\n", "\n") or report.response == given
    assert report.verdict in ("factual", "no_claims"), report.verdict
    assert all(c.label == "factual" for c in report.claims)
    for claim in report.claims:
        for span in claim.spans:
            assert 0 <= span.start < span.end <= len(report.response), (span, len(report.response))


# Numbers at and past their limits, on every numeric option of verify.
_NUMBER = (
    st.sampled_from(
        [
            "0",
            "-1",
            "1",
            "inf",
            "-inf",
            "nan",
            "1e309",
            "2.5",
            "9" * 30,
            str(2**63),
            str(2**63 - 1),
            "0x10",
            "",
            "1_000",
        ]
    )
    | st.integers().map(str)
    | st.floats().map(str)
    | st.integers(0, 12).map(str)  # the values users give, at and around most ranges
    | st.floats(0, 3).map(lambda f: f"{f:.2f}")
)
_NUMERIC_OPTIONS = [
    "--claims.max-claims",
    "--retrieval.top-k",
    "--search.results-per-query",
    "--debate.min-rounds",
    "--debate.max-rounds",
    "--debate.max-parse-retries",
    "--model.temperature",
    "--model.seed",
    "--model.timeout-s",
    "--model.requests-per-minute",
    "--model.tokens-per-minute",
    "--model.price-in",
    "--model.price-out",
    "--model.max-concurrency",
    "--claim-concurrency",
    "--items",
    "--max-consecutive-failures",
]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(_NUMERIC_OPTIONS), value=_NUMBER)
@example(option="--model.timeout-s", value="inf")
@example(option="--model.seed", value="9" * 30)
def test_numbers_at_and_past_their_limits_are_one_line(
    endpoint: str, option: str, value: str, reached: Reached
) -> None:
    """Correct outcome: a value inside the option's documented range (a configuration field's bounds, shown by
    `--help-all`; --items and --max-consecutive-failures from 1) is taken, and the estimate runs; any other value,
    a number past the range, a fraction where a whole number goes, inf, nan, is refused in one line naming the
    option."""
    reached.require(taken=0.1, refused=0.1)
    # A price is both halves or neither: the other half is given, so the value is what decides.
    other = {"--model.price-in": ["--model.price-out", "1"], "--model.price-out": ["--model.price-in", "1"]}
    answer = ["--answer", "The sky is blue.", *other.get(option, [])]
    ran = run("verify", *answer, option, value, "--model.base-url", endpoint, "--estimate")
    assert_handled(ran)
    expected = _in_range(option, value)
    if ran.code == 2:
        reached("refused")
        assert not expected, (option, value, ran.err)
        assert option in ran.err or option.replace("-", "_") in ran.err, ran.err
        return
    reached("taken")
    assert ran.code == 0 and expected, (option, value, ran.err[-500:])


def _in_range(option: str, value: str) -> bool:
    """Whether `value` is a number `option` documents: a whole number for a whole-number field, finite, inside
    its bounds; min_rounds and max_rounds also on the right side of the other's default (2 and 5)."""
    path = option[2:].replace("-", "_")
    field = FIELDS.get(path)
    whole = field is None or field.core is int
    if path.startswith("search."):
        return False  # a search setting turns search on, which then needs its backend (named in the refusal)
    if whole:
        # digits (1_000 grouped), at most a point followed by zeros: 3 and 3.0 are the whole number 3; 2.5, 1e3 not
        if not re.fullmatch(r"\s*[+-]?\d+(_\d+)*(\.0*)?\s*", value):
            return False
        number: float = int(value.strip().split(".")[0])
    else:
        try:
            number = float(value)
        except ValueError:
            return False
    if not math.isfinite(number):
        return False
    low: float = 1.0  # --items and --max-consecutive-failures
    high: float = math.inf
    above = False  # a gt bound: the low end itself is out
    if field is not None:
        bounds = {
            name: getattr(b, name) for b in field.info.metadata for name in ("ge", "gt", "le") if hasattr(b, name)
        }
        low, above, high = bounds.get("ge", bounds.get("gt", -math.inf)), "gt" in bounds, bounds.get("le", math.inf)
    if path == "debate.min_rounds":
        high = min(high, 5)
    if path == "debate.max_rounds":
        low = max(low, 2)  # at least the default min_rounds
    if above and number == low:
        return False
    return low <= number <= high


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


def _encoded(text: str, how: str) -> bytes:
    if how == "utf-8-sig":
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    if how == "crlf":
        return text.replace("\n", "\r\n").encode("utf-8", "surrogatepass")
    return text.encode(how, "surrogatepass")


# What a file a user names may hold: JSON of any shape, in any of the encodings a user's editor writes, or raw bytes.
FILE_BYTES = (
    st.tuples(
        _json_values().map(lambda v: json.dumps(v, ensure_ascii=False)),
        st.sampled_from(
            ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "crlf"]
        ),  # -le, -be: no mark
    ).map(lambda pair: _encoded(*pair))
    | st.binary(max_size=300)
    | st.sampled_from(
        [
            b"",
            b"[" * 10000 + b"]" * 10000,
            b'{"a": ' + b"9" * 5000 + b"}",
            b"caf\xe9",
            "\ufeff{}".encode("utf-16"),
            b'{"S0": "\\ud800 lone"}',
            b"a = [",
            b'{\n  "id": "1",\n  "response": "x"\n}',
        ]
    )
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=FILE_BYTES, door=st.sampled_from(["sources", "chain-json", "chain-toml", "key", "answer"]))
@example(content=b"[" * 10000 + b"]" * 10000, door="sources")
@example(content=b'{"": "The sky is blue."}', door="sources")  # found: a source with an empty id was a traceback
@example(content=b"[1, 2]", door="chain-json")
@example(content=b"caf\xe9", door="answer")
@example(content="Shakespeare wrote Hamlet.".encode("utf-16-le"), door="answer")  # found: read as 'S\x00h\x00...'
@example(content=json.dumps(["a passage", "another"]).encode(), door="sources")  # found: texts where sources go
@example(content=b"\x00", door="key")  # found: a key with a control character broke the request's headers
def test_every_file_option_reads_any_bytes(
    endpoint: str, content: bytes, door: str, tmp_path: Path, reached: Reached
) -> None:
    """Correct outcome: a file read as the text it holds (UTF-8, or UTF-16/32 by its mark; the mark itself never part
    of the text), so an answer given as @FILE is verified as exactly that text; or one line naming the file or its
    option, exit 2."""
    reached.require(read=0.02)  # read: 12 to 14 of 107 examples in three runs
    suffix = {"chain-json": ".json", "chain-toml": ".toml"}.get(door, ".txt")
    path = tmp_path / f"given{suffix}"
    path.write_bytes(content)
    argv = ["verify", "--model.base-url", endpoint, "--model.model", "fake-model", "--question", "q", "--json"]
    flag = {"sources": "--sources", "chain-json": "--debate.chain", "chain-toml": "--debate.chain"}
    if door == "sources":
        argv += ["--task", "rag", "--answer", "The sky is blue on clear days [S0].", "--sources", str(path)]
    elif door.startswith("chain"):
        argv += ["--answer", "The sky is blue.", "--debate.chain", str(path)]
    elif door == "key":
        argv += ["--answer", "The sky is blue.", "--api-key-file", str(path)]
    else:
        argv += ["--answer", f"@{path}"]
    ran = run(*argv)
    assert_handled(ran)
    if ran.code == 2:
        reached("refused")
        assert str(path) in ran.err or flag.get(door, "--answer") in ran.err or "--api-key-file" in ran.err, ran.err
        return
    reached("read")
    report = Report.model_validate_json(ran.out)
    if door == "answer":
        assert report.response == _as_text(content), (content[:80], report.response[:80])


def _as_text(content: bytes) -> str:
    """What a text file holds, by its mark (none: UTF-8), without the mark, line ends as written."""
    for mark, codec in (
        (b"\xef\xbb\xbf", "utf-8"),
        (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
    ):
        if content.startswith(mark):
            return content[len(mark) :].decode(codec)
    return content.decode("utf-8")


_TOOL = {"name": "api_call", "parameters": {"type": "object", "properties": {"endpoint": {"type": "string"}}}}
_REGISTRY = json.dumps([{"type": "function", "function": _TOOL}]).encode()
# calls a user's agent makes: the registry's tool or another, with any arguments
_CALLS = st.fixed_dictionaries(
    {"name": st.sampled_from(["api_call", "delete_database", "x"]), "arguments": _json_values()}
).map(lambda call: json.dumps(call).encode())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # half the time a real registry and a call an agent makes, half any bytes
    registry=st.integers(0, 1).flatmap(lambda k: FILE_BYTES if k == 0 else st.just(_REGISTRY)),
    call=st.integers(0, 1).flatmap(lambda k: FILE_BYTES if k == 0 else _CALLS),
    language=st.sampled_from(["en", "zh"]),
)
def test_check_tools_reads_any_bytes(
    registry: bytes, call: bytes, language: str, tmp_path: Path, reached: Reached
) -> None:
    """Correct outcome, by check-tools' own codes: 0 and no finding, 1 and the findings (each with its kind and
    confidence), or 2 and one line naming the file that could not be read; generated calls against a real
    registry reach findings."""
    reached.require(findings=0.05)
    (tmp_path / "registry.json").write_bytes(registry)
    (tmp_path / "call.json").write_bytes(call)
    ran = run(
        "check-tools",
        "--registry",
        str(tmp_path / "registry.json"),
        "--call",
        str(tmp_path / "call.json"),
        "--language",
        language,
        "--json",
    )
    assert "Traceback" not in ran.err, ran.err[-3000:]
    assert ran.code in (0, 1, 2)
    if ran.code == 2:
        reached("unreadable")
        assert "registry.json" in ran.err or "call.json" in ran.err or "--registry" in ran.err, ran.err
        return
    findings = json.loads(ran.out)
    reached("findings" if findings else "clean")
    assert (ran.code == 1) == bool(findings)
    assert all(f["kind"] and 0 < f["confidence"] <= 1 for f in findings)


_ITEM = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=10), st.integers(), st.none())},
    optional={
        "question": st.one_of(st.text(max_size=40), st.integers(), st.none()),
        "response": st.one_of(st.text(max_size=200), st.integers(), st.lists(st.text(max_size=5), max_size=2)),
        "reference": st.one_of(
            st.text(max_size=60),
            st.dictionaries(st.text(max_size=4), st.text(max_size=10), max_size=2),
            st.lists(st.text(max_size=10), max_size=2),
        ),
        "claims": st.one_of(
            st.lists(st.text(max_size=20), max_size=2), st.lists(st.lists(st.text(max_size=5), max_size=4), max_size=2)
        ),
    },
)


def _batch_file(items: list[Any], form: str) -> bytes:
    if form == "json":
        return json.dumps(items, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if form == "csv":
        lines = ["id,question,response,reference"]
        for item in items:
            cells = [
                str(item.get(k, "")) if isinstance(item, dict) else ""
                for k in ("id", "question", "response", "reference")
            ]
            lines.append(",".join('"' + c.replace('"', '""') + '"' for c in cells))
        return "\n".join(lines).encode("utf-8", "surrogatepass")
    return b"".join(json.dumps(i, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n" for i in items)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(_ITEM | _json_values(), max_size=4),
    form=st.sampled_from(["jsonl", "json", "csv"]),
    extra=st.sampled_from(
        [b"", b"\n\n", b"not json\n", b'{"id": "z", "response": ' + b"9" * 5000 + b"}\n", b"\xff\xfe\n"]
    ),
)
@example(items=[{"id": "\x1f", "response": 0}], form="csv", extra=b"")  # found: an id that no header can carry
def test_a_batch_of_any_items_records_each_and_leaves_whole_lines(
    endpoint: str, items: list[Any], form: str, extra: bytes, tmp_path: Path, reached: Reached
) -> None:
    """Correct outcome: one record per item (a JSONL file's non-blank line, an array's element, a CSV row), in
    input order, each numbered; an item that is not a JSON object, or has no text `response`, is an error record
    whose message names its line; every result is factual or without claims (the judge says true to every claim);
    or the file refused in one line, nothing written. A fifth at least get records."""
    reached.require(records=0.2)
    source = tmp_path / f"in.{form}"
    source.write_bytes(_batch_file(items, form) + (extra if form == "jsonl" else b""))
    output = tmp_path / "out.jsonl"
    output.unlink(missing_ok=True)
    ran = run(
        "verify",
        "--input",
        str(source),
        "--output",
        str(output),
        "--model.base-url",
        endpoint,
        "--model.model",
        "fake-model",
    )
    assert_handled(ran)
    if ran.code == 2:
        reached("refused")
        assert str(source.name) in ran.err or "--input" in ran.err, ran.err
        assert not output.exists() or not output.read_bytes()
        return
    reached("records")
    data = output.read_bytes()
    assert not data or data.endswith(b"\n")
    records = [json.loads(line) for line in data.splitlines()]
    given = _given_items(source.read_bytes(), form)
    data_is_array = form == "json" or source.read_bytes().lstrip().startswith(b"[")
    assert [r["line"] for r in records] == [n for n, _ in given], (records, given)
    for record, (number, item) in zip(records, given, strict=True):
        if "error" in record:
            where = "item" if data_is_array else "line"  # an array's elements are items, a file's rows lines
            assert record["error"]["message"].startswith(f"{where} {number}:"), record
        else:
            assert record["result"]["verdict"] in ("factual", "no_claims"), record
        if not isinstance(item, dict) or not isinstance(item.get("response"), str):
            assert "error" in record, (item, record)
    # the gate: a line without a verdict (or no line at all) fails the run, exit 5; else it passes
    unchecked = sum("error" in r for r in records)
    assert ran.code == (5 if unchecked or not records else 0), (ran.code, unchecked, ran.err[-500:])
    if ran.code == 5:
        assert (
            "nothing was verified" in ran.err
            if not records
            else f"{unchecked} of {len(records)} input line(s) not checked" in ran.err
        )


def _given_items(data: bytes, form: str) -> list[tuple[int, Any]]:
    """(the number a record gives it, what was read) of each item of a batch file, as the docs define an item: a
    file that starts with `[` is one JSON array, whatever its suffix."""
    if form == "json" or data.lstrip().startswith(b"["):
        return list(enumerate(json.loads(data), 1))
    if form == "csv":
        import csv

        reader = csv.DictReader(io.StringIO(data.decode("utf-8", "surrogateescape"), newline=None))  # CR ends a line
        rows, start = [], 2
        for row in reader:  # a row's number is the line it starts on (a quoted cell may hold a line break)
            if any((v or "").strip() for v in row.values()):  # a row of blanks is a blank line
                rows.append((start, row))
            start = reader.line_num + 1
        return rows
    out: list[tuple[int, Any]] = []
    for n, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except ValueError:
                out.append((n, None))
    return out


@pytest.fixture(scope="module")
def log_lines(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The lines of a real results log: a factual result, and input errors of three kinds."""
    folder = tmp_path_factory.mktemp("log")
    items = [{"id": "a", "question": "q", "response": "The sky is blue.", "reference": "r"}, {"id": "b"}, [1]]
    (folder / "in.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items) + "not json\n")
    argv = ["--input", str(folder / "in.jsonl"), "--output", str(folder / "out.jsonl"), "--model.base-url", endpoint]
    ran = run("verify", *argv, "--model.model", "fake-model")
    assert ran.code == 5 and "3 of 4 input line(s) not checked" in ran.err, ran.err  # the three input errors
    return (folder / "out.jsonl").read_bytes().splitlines()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=FILE_BYTES, picks=st.lists(st.integers(0, 5), max_size=8), data=st.booleans())
def test_report_reads_any_results_log(
    content: bytes, picks: list[int], data: bool, log_lines: list[bytes], tmp_path: Path, reached: Reached
) -> None:
    """Correct outcome: for a results log (lines of a real one, in any number and order, blank lines between),
    the summary counts exactly its records, its verdicts and its input errors; for any other bytes, one line
    naming the file and the line, exit 2, or a report of what could be read."""
    reached.require(counted=0.1)
    path = tmp_path / "results.jsonl"
    pool = [*log_lines, b"", b"   "]
    chosen = [pool[i % len(pool)] for i in picks]
    path.write_bytes(b"\n".join(chosen) + b"\n" if data else content)
    ran = run("report", str(path), "--format", "json")
    assert_handled(ran)
    if not data or ran.code != 0:
        reached("other")
        assert ran.code != 0 or not data, ran.err
        return
    reached("counted")
    [summary] = json.loads(ran.out)["results_logs"]
    records = [json.loads(line) for line in chosen if line.strip()]
    results = [r["result"] for r in records if "result" in r]
    assert summary["records"] == len(records)
    assert summary["input_errors"] == sum(1 for r in records if "error" in r)
    assert summary["factual"] == sum(1 for r in results if r["verdict"] == "factual")
    assert sum(
        summary[v] for v in ("factual", "non_factual", "not_enough_evidence", "unverifiable", "no_claims")
    ) == len(results)


_WORDS = st.text(max_size=200).map(lambda s: f"The sky is blue. {s}")
_API_VALUE = st.one_of(
    st.none(),
    st.text(max_size=200),
    st.integers(),
    st.floats(),
    st.lists(st.text(max_size=10), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=10), st.integers()), max_size=3),
)


# one draw in four any value at all, the others what a caller passes (a text with a sentence in it)
_MOSTLY_WORDS = st.integers(0, 3).flatmap(lambda k: _API_VALUE if k == 0 else _WORDS)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    response=_MOSTLY_WORDS,
    question=_MOSTLY_WORDS,
    reference=_MOSTLY_WORDS,
    task=st.sampled_from(["qa", "rag", "summarization", "dialogue", "general", "kbqa", "nope"]),
)
@example(response="0", question=None, reference=0, task="qa")  # found: a reference of no known shape
def test_the_python_api_gives_a_report_or_a_typed_error(
    endpoint: str, response: Any, question: Any, reference: Any, task: str, reached: Reached
) -> None:
    """Correct outcome: a response or question of the wrong type is an InputError naming it; an unknown task an
    InputError naming the task, before any model starts; any other refusal names the field at fault. A report is
    of the response given (each claim's spans inside it), factual or without claims (the judge says true to every
    claim)."""
    reached.require(report=0.1)
    config = VerifierConfig(model=ModelConfig(base_url=endpoint, model="fake-model"))
    try:
        item = TaskInput(response, question=question, reference=reference)
    except InputError as exc:  # the item's own shape, before any task reads it
        reached("input error")
        assert not isinstance(response, str) or not isinstance(question, str | None), (response, question)
        assert re.search(r"response|question|reference", str(exc)), exc
        return
    try:
        report = verify(item, task=task, config=config)
    except InputError as exc:
        reached("input error")
        if task == "nope":  # the task is named first, before any model starts
            assert str(exc).startswith("unknown task 'nope'"), exc
            return
        assert re.search(r"response|question|reference|source|document|knowledge|dialogue|claim", str(exc)), exc
        return
    reached("report")
    assert task != "nope" and isinstance(response, str) and response.strip(), (task, response)
    assert report.response == response
    assert report.verdict in ("factual", "no_claims"), report.verdict
    for claim in report.claims:
        for span in claim.spans:
            assert 0 <= span.start < span.end <= len(response), (span, len(response))
