"""The command line's last silent answers (issue 65): each input a user types gets a correct result or one line
naming the problem, with a documented exit code; fed as a user would, through `debate` itself (in process)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.cli import main
from debate.cli.fields import FIELDS, from_text
from debate.errors import InputError
from debate.prefilter import APIEndpointChecker
from tests.support.properties import Reached, examples


def test_none_turns_every_prefilter_off_as_the_help_offers() -> None:
    assert from_text(FIELDS["prefilter.prefilters"], "none") == []
    assert from_text(FIELDS["prefilter.prefilters"], " NONE ") == []
    assert from_text(FIELDS["prefilter.prefilters"], "rules,logprob") == ["rules", "logprob"]


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_allowed_endpoint_is_refused_not_an_allow_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], empty: str
) -> None:
    registry, call = tmp_path / "tools.json", tmp_path / "call.json"
    registry.write_text(json.dumps({"tools": []}))
    call.write_text(json.dumps({"name": "api_call", "arguments": {"endpoint": "https://evil.example/x"}}))
    args = ["check-tools", "--registry", str(registry), "--call", str(call), "--endpoint-match", "prefix"]
    assert main([*args, "--allow-endpoint", "https://api.example.com", "--allow-endpoint", empty]) == 2
    assert "allowed endpoint 2 (--allow-endpoint) is empty: it would allow every URL" in capsys.readouterr().err
    with pytest.raises(InputError, match="allowed endpoint 1"):
        APIEndpointChecker([empty], match="prefix")
    # a real allow-list still finds the call to an endpoint it does not list
    assert main([*args, "--allow-endpoint", "https://api.example.com"]) == 1


_HOSTS = st.sampled_from(["https://api.example.com", "https://api.example.com/v1", "https://evil.example", "http://x"])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(_HOSTS | st.sampled_from(["", " ", "\t"]) | st.text(max_size=12), min_size=1, max_size=4),
    endpoint=_HOSTS.flatmap(lambda h: st.sampled_from([h, h + "/x", h + "x"])),
    match=st.sampled_from(["exact", "prefix"]),
)
def test_any_allow_list_allows_exactly_what_it_names(
    tmp_path: Path, entries: list[str], endpoint: str, match: str, reached: Reached
) -> None:
    """Correct outcome (issue 65's class of input, empty allow-list entries): a blank entry is refused naming it;
    otherwise the call is allowed (exit 0) exactly when its endpoint is one of the entries (exact) or lies under
    one (prefix: the entry, then the URL's end, `/`, `?` or `#`; found by this property: a plain string prefix let
    https://api.example.comx through), else found (exit 1)."""
    reached.require(allowed=0.01, found=0.05, refused=0.05)
    registry, call = tmp_path / "tools.json", tmp_path / "call.json"
    tool = {"name": "api_call", "parameters": {"type": "object", "properties": {"endpoint": {"type": "string"}}}}
    registry.write_text(json.dumps([{"type": "function", "function": tool}]))
    call.write_text(json.dumps({"name": "api_call", "arguments": {"endpoint": endpoint}}))
    argv = ["check-tools", "--registry", str(registry), "--call", str(call), "--endpoint-match", match]
    for entry in entries:
        argv.append(f"--allow-endpoint={entry}")  # = keeps an entry that starts with - a value
    code = main(argv)
    blank = [n for n, e in enumerate(entries, 1) if not e.strip()]
    if blank:
        reached("refused")
        assert code == 2
        return
    allowed = any(endpoint == e if match == "exact" else _under(endpoint, e.strip()) for e in entries)
    reached("allowed" if allowed else "found")
    assert code == (0 if allowed else 1), (entries, endpoint, match)


def _under(url: str, entry: str) -> bool:
    """docs/prefilters.md's rule, stated again: the entry itself, or the entry followed by / ? or # (or ending in /)."""
    return (
        url == entry
        or any(url.startswith(entry + mark) for mark in "/?#")
        or (entry.endswith("/") and url.startswith(entry))
    )


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_its_mark_is_named_not_verified_as_nul_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str
) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_bytes("Shakespeare wrote Hamlet.".encode(encoding))
    argv = ["verify", "--question", "Who wrote Hamlet?", "--answer", f"@{answer}", "--model.base-url"]
    # What earlier tests of this process left for the garbage collector (aiohttp says "Unclosed client session" to
    # a log handler whose stream is gone) is said now, not inside this test's one line.
    gc.collect()
    capsys.readouterr()
    assert main([*argv, "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "looks like UTF-16 without a byte-order mark" in err and len(err.strip().splitlines()) == 1
    # with its mark it is read (and then fails only for the endpoint that is not there)
    answer.write_bytes("Shakespeare wrote Hamlet.".encode("utf-16"))
    assert main([*argv, "http://127.0.0.1:9/v1", "--model.max-attempts", "1"]) == 1
    assert "nothing answers at" in capsys.readouterr().err


def test_a_json_syntax_error_reads_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sources = tmp_path / "sources.json"
    sources.write_text('{"S0": "the sky is blue')
    argv = ["verify", "--task", "rag", "--answer", "Blue [S0].", "--sources", str(sources)]
    assert main([*argv, "--model.base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "(Unterminated string starting at column 8)" in err and "at at" not in err, err


def test_output_dash_is_refused_not_a_file_named_dash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"question": "q", "response": "a"}) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--input", str(source), "--output", "-"]) == 2
    assert "--output -: the results log must be a file" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_a_finished_batch_rerun_with_other_settings_is_refused_like_a_resumed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run to its end, then run again: the same options say "already done" (no model asked); other debate
    settings, another task or another named model are refused naming what differs, and the records stand."""
    from tests.support.fakes import FakeOpenAI, Reply
    from tests.support.helpers import op

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    items = [{"id": f"q{i}", "question": "Capital of France?", "response": "Paris."} for i in range(2)]
    source.write_text("".join(json.dumps(item) + "\n" for item in items))
    with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}) as model:
        base = ["verify", "--input", str(source), "--output", str(out), "--model.base-url", model.base_url]
        assert main([*base, "--debate.min-rounds", "1"]) == 0
        written = out.read_text()
        capsys.readouterr()
        assert main([*base, "--debate.min_rounds", "1"]) == 0  # the same settings, the other spelling
        assert "0 written, 2 already done" in capsys.readouterr().err
        asked = len(model.calls)
        for other, said in (
            (["--debate.min-rounds", "0"], "debate.min_rounds: 1 -> 0"),
            (["--debate.min-rounds", "1", "--task", "general"], 'task: "qa" -> "general"'),
            (["--debate.min-rounds", "1", "--model.model", "other-model"], 'model: "fake-model" -> "other-model"'),
        ):
            assert main([*base, *other]) == 2, other
            err = capsys.readouterr().err
            assert "holds 2 finished record(s) made with other settings" in err and said in err, err
        assert len(model.calls) == asked and out.read_text() == written


_TYPED = [path for path, field in FIELDS.items() if field.core in (bool, int, float)]


@settings(max_examples=examples(2, why="a pure function, well under a millisecond an example"), deadline=None)
@given(
    path=st.sampled_from(_TYPED),
    value=st.one_of(st.booleans(), st.integers(-5, 5), st.floats(-5, 5), st.sampled_from(["yes", "1", "true", ""])),
)
def test_a_config_file_is_read_as_strictly_as_the_command_line(path: str, value: object, tmp_path_factory: Any) -> None:
    """Any typed value for any boolean or numeric setting: a value of the field's own type is read (or refused by
    the field's own limits), a boolean for a number or anything but a boolean for a boolean is refused naming the
    key; never converted (`min_rounds = true` once ran 1 round)."""
    from debate.cli.layers import load_config_file
    from debate.errors import UsageError

    field = FIELDS[path]
    file = tmp_path_factory.mktemp("config") / "c.json"
    nested: dict[str, Any] = {}
    node = nested
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    file.write_text(json.dumps(nested))
    # refused as read: a boolean setting given anything but true/false, a numeric one given a boolean or text (a
    # float for an integer is the field's own validation's to refuse, with its limits, later)
    refused = not isinstance(value, bool) if field.core is bool else isinstance(value, bool | str)
    try:
        layer = load_config_file(file)
    except UsageError as exc:
        assert refused and f"{path} = " in str(exc), (path, value, str(exc))
        return
    assert not refused, (path, value)
    assert layer.values[path] == value


def test_rag_sources_given_as_plain_texts_are_refused_not_all_invalid_citations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.fakes import FakeOpenAI, Reply
    from tests.support.helpers import op

    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps(["The sky is blue on clear days.", "Grass is green."]))
    with FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))}) as model:
        argv = ["verify", "--task", "rag", "--answer", "The sky is blue [S0].", "--sources", str(sources)]
        assert main([*argv, "--model.base-url", model.base_url]) == 2
    assert "task rag needs sources with ids that its citations name" in capsys.readouterr().err


def test_a_benchmark_file_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    """`debate eval`'s length baseline reads its tuning pairs from the data file: with a UTF-8 mark (a file saved
    by an editor) it gives the same pairs, and a line that is not a record is named, not a traceback."""
    from experiments.baselines import tuning_pairs
    from experiments.data import DataError
    from tests.support.helpers import ROOT

    plain = (ROOT / "tests" / "fixtures" / "data" / "halueval" / "qa_data.jsonl").read_bytes()
    for name, data in (("plain", plain), ("marked", b"\xef\xbb\xbf" + plain)):
        (tmp_path / name / "halueval").mkdir(parents=True)
        (tmp_path / name / "halueval" / "qa_data.jsonl").write_bytes(data)
    kwargs: dict[str, Any] = {"exclude_lines": set(), "seed": 0, "m": 1000}
    expected = tuning_pairs("halueval", "qa", data_dir=tmp_path / "plain", **kwargs)
    assert expected and tuning_pairs("halueval", "qa", data_dir=tmp_path / "marked", **kwargs) == expected
    (tmp_path / "marked" / "halueval" / "qa_data.jsonl").write_bytes(plain + b'{"question": "q"}\n')
    with pytest.raises(DataError, match=r"line \d+: not a halueval qa record"):
        tuning_pairs("halueval", "qa", data_dir=tmp_path / "marked", **kwargs)


def test_report_on_a_qa_log_sums_its_verdicts_and_says_why_no_rag_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A QA results log: its verdicts counted, and one line saying it has no RAG answers (not a RAG table of 0
    answers); the same log given twice is one row; a RefChecker array given in place of its results log is named."""
    from tests.support.fakes import FakeOpenAI, Reply
    from tests.support.helpers import op

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [{"id": "a", "question": "Capital of France?", "response": "Paris."}, {"id": "b", "question": "q"}]
    source.write_text("".join(json.dumps(item) + "\n" for item in lines))
    with FakeOpenAI(routes={"debate": lambda call: Reply(content=op(True))}) as model:
        argv = ["verify", "--input", str(source), "--output", str(out), "--model.base-url", model.base_url]
        assert main(argv) == 5  # line b is an input error: not checked
        assert main([*argv, "--tolerate-unchecked"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), str(tmp_path / "." / "out.jsonl")]) == 0
    shown = capsys.readouterr().out
    assert "RAG monitoring (" not in shown and shown.count(f"| {out} |") == 1, shown  # no table of 0 answers
    assert f"| {out} | 2 | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | qa 1 |" in shown, shown
    assert f"{out}: no RAG answers (tasks: qa 1): no RAG monitoring figures" in shown
    array = tmp_path / "refchecker.json"
    array.write_text("[]")
    (tmp_path / "refchecker.json.jsonl").write_text(out.read_text())
    assert main(["report", str(array)]) == 2
    err = capsys.readouterr().err
    assert "a JSON array (RefChecker's format" in err and "refchecker.json.jsonl, beside it" in err


def test_config_show_prints_each_stage_option_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    from debate.plugins import PREFILTERS, ROLLUPS, stage_options

    argv = ["config", "show", "--prefilter.prefilters", "rules,logprob", "--rollup", "soft"]
    assert main([*argv, "--prefilter.options", "logprob.trust_grounded=true"]) == 0
    shown = {
        line.split(" = ")[0].strip(): line.split(" = ")[1]
        for line in capsys.readouterr().out.splitlines()
        if " = " in line
    }
    logprob, soft = stage_options(PREFILTERS, "logprob"), stage_options(ROLLUPS, "soft")
    assert logprob is not None and soft is not None
    for key, default in logprob().model_dump(mode="json").items():
        given = key == "trust_grounded"
        value, source = (json.dumps(True), "given") if given else (json.dumps(default), "the stage's default")
        assert shown[f"prefilter.options.logprob.{key}"] == f"{value}  ({source})"
    threshold = soft().model_dump(mode="json")["threshold"]
    assert shown["rollup_options.soft.threshold"] == f"{json.dumps(threshold)}  (the stage's default)"
    assert not any(key.startswith("prefilter.options.rag-judge") for key in shown)  # not a stage of this run
