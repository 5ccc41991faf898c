"""The command line's conventions: help and defaults for every option, examples, --version, global options
anywhere, one-line errors with "did you mean", no options that do nothing, and endpoint failures named as what
they are (nothing listening, a wrong path, a refused key, a wrong model), each with what to do."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from debate.cli import build_parser, walk
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import debate, op

pytestmark = pytest.mark.slow  # starts processes


def _leaves() -> list[argparse.ArgumentParser]:
    parser = build_parser(["eval"])  # not a built-in command: the plugin commands are loaded too
    return [p for p in walk(parser) if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)]


def test_every_option_of_every_command_has_help_with_its_default() -> None:
    leaves = _leaves()
    names = {p.prog for p in leaves}
    assert {
        "debate verify",
        "debate eval halueval",
        "debate eval factprompts",
        "debate ablate transitions",
        "debate report",
        "debate serve",
        "debate worker",
        "debate new-key",
        "debate cache",
        "debate data fetch",
        "debate data list",
        "debate data path",
    } <= names
    for parser in leaves:
        text = parser.format_help()
        assert "examples:" in text, parser.prog
        listed = text.split("examples:", 1)[1].split("\n\n", 1)[0]
        assert max(map(len, listed.splitlines())) <= 80, (parser.prog, listed)  # copies whole from any terminal
        # one spelling for "no default", and no doubled punctuation from joined descriptions
        assert "(default: None)" not in text and ".;" not in text, parser.prog
        parser.show_all = True  # type: ignore[attr-defined]
        assert "Undefined" not in parser.format_help(), parser.prog  # a required field of an optional section
        parser.show_all = False  # type: ignore[attr-defined]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{parser.prog} {action.option_strings or action.dest}: no help"
            if action.option_strings and action.default is not argparse.SUPPRESS:
                shown = parser._get_formatter()._get_help_string(action)
                assert shown is not None and "default" in shown, (
                    f"{parser.prog} {action.option_strings}: no default shown"
                )


def test_no_option_does_nothing() -> None:
    options = {p.prog: {o for a in p._actions for o in a.option_strings} for p in _leaves()}
    # serve and worker run no batch: --items/--workers would do nothing there
    for command in ("debate serve", "debate worker"):
        assert not {"--items", "--workers"} & options[command]
    # an ablation sets what it varies itself
    fixed_here = {"--debate.chain", "--debate.min-rounds", "--chain", "--transition", "--min-rounds", "--method"}
    assert not fixed_here & options["debate ablate transitions"]
    assert not {"--debate.min-rounds", "--method"} & options["debate ablate min-rounds"]
    assert not {"--prompt-set", "--method"} & options["debate ablate prompt-set"]
    # FactPrompts comes with annotated claims and no knowledge or hallucinated twin
    assert (
        not {"--balanced", "--knowledge", "--claims.format", "--claims.max-claims", "--judge-knowledge"}
        & options["debate eval factprompts"]
    )
    assert {"--balanced", "--knowledge", "--claims.max-claims"} <= options["debate eval halueval"]


def test_version_and_global_options_anywhere() -> None:
    version = debate("--version")
    assert version.returncode == 0 and version.stdout.startswith("debate (markov-debate) ")
    parser = build_parser(["verify"])
    assert parser.parse_args(["-v", "verify", "--answer", "x"]).verbose is True
    assert parser.parse_args(["verify", "--answer", "x", "-v"]).verbose is True
    assert parser.parse_args(["verify", "--answer", "x"]).verbose is False
    for where in (["verify", "--version"], ["serve", "-V"]):
        with pytest.raises(SystemExit) as done:
            build_parser(where).parse_args(where)
        assert done.value.code == 0


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["verify", "--task", "qaa", "--answer", "x"], "invalid choice: 'qaa'; did you mean 'qa'?"),
        (["verfy"], "invalid choice: 'verfy'; did you mean 'verify'?"),
        (["verify", "--rollup", "majr", "--answer", "x"], "did you mean 'major'?"),
        (["verify", "--taks", "qa"], "did you mean --task for --taks?"),
        # abbreviations are refused, naming the full option: a later option of the same start cannot change them
        (["verify", "--answer", "x", "--debate.cal", "c.json"], "did you mean --debate.calibration for --debate.cal?"),
        (["verify", "--answ", "x"], "unrecognized arguments: --answ x; did you mean --answer for --answ?"),
    ],
)
def test_usage_errors_are_one_line_with_did_you_mean(args: list[str], line: str) -> None:
    done = debate(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0], done.stderr
    assert "usage:" not in done.stderr


def _error(done: subprocess.CompletedProcess[str]) -> str:
    lines: list[str] = done.stderr.strip().splitlines()
    return lines[-1]


def test_endpoint_failures_say_what_they_are() -> None:
    down = debate("verify", "--answer", "x", "--model.base-url", "http://127.0.0.1:9/v1", "--model.timeout-s", "1")
    assert down.returncode == 1
    assert "nothing answers at http://127.0.0.1:9/v1" in _error(down) and "is the server running?" in _error(down)
    # one line per retry, in plain words: no transport internals (aiohttp's "ssl:default", its connector repr)
    lines = down.stderr.strip().splitlines()
    retry = "WARNING debate.retry: remote call failed (connection refused by 127.0.0.1:9); retry {} of 4"
    assert lines[:-1] == [retry.format(n) for n in range(1, 5)], down.stderr
    assert "ssl:default" not in down.stderr and "Connect call failed" not in down.stderr

    with FakeOpenAI(models=("llama3.1:8b", "qwen2.5:7b")) as server:
        root = server.base_url.removesuffix("/v1")
        wrong_path = debate("verify", "--answer", "x", "--model.base-url", root)
        assert wrong_path.returncode == 1
        assert f"try {root}/v1" in _error(wrong_path) and "not an OpenAI-compatible API root" in _error(wrong_path)

        several = debate("verify", "--answer", "x", "--model.base-url", server.base_url)
        assert several.returncode == 1
        assert "serves 2 models (llama3.1:8b, qwen2.5:7b)" in _error(several) and "pass --model.model" in _error(
            several
        )

    with FakeOpenAI(
        [Reply(status=404, error_message="model 'llama3-8b' not found")], models=("llama3.1:8b", "qwen2.5:7b")
    ) as server:
        wrong_model = debate(
            "verify",
            "--answer",
            "x",
            "--model.base-url",
            server.base_url,
            "--model.model",
            "llama3-8b",
            "--debate.min-rounds",
            "0",
        )
    assert wrong_model.returncode == 1
    assert "does not serve model 'llama3-8b'" in _error(wrong_model)
    assert "it serves: llama3.1:8b, qwen2.5:7b" in _error(wrong_model)
    assert "did you mean --model.model llama3.1:8b?" in _error(wrong_model)

    with FakeOpenAI([Reply(status=401, error_message="missing key")]) as server:
        no_key = debate("verify", "--answer", "x", "--model.base-url", server.base_url)
        assert len(server.headers) == 1 and "authorization" not in server.headers[0]  # no made-up key is sent
        assert server.headers[0]["x-debate-purpose"] == "debate:initial"
    assert no_key.returncode == 1
    assert "wants an API key and none was set" in _error(no_key) and "--model.api-key" in _error(no_key)


def test_a_hosted_endpoint_without_a_key_is_refused_before_any_call() -> None:
    done = debate("verify", "--answer", "x", "--model.base-url", "https://api.openai.com/v1")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "debate: error: https://api.openai.com/v1 is a hosted endpoint and no API key is set; "
        "pass --model.api-key (or set OPENAI_API_KEY)"
    )


def test_python_api_errors_speak_in_api_terms() -> None:
    import asyncio

    from debate import ModelConfig, ModelRequestError, UsageError, VerifierConfig, averify

    with pytest.raises(UsageError, match=r"set ModelConfig.api_key \(or OPENAI_API_KEY\)"):
        asyncio.run(averify("x", config=VerifierConfig(model=ModelConfig(base_url="https://api.example.com/v1"))))
    with FakeOpenAI(models=("a-model", "b-model")) as server:
        with pytest.raises(ModelRequestError, match=r"set ModelConfig.model \(or DEBATE_MODEL\)") as caught:
            asyncio.run(averify("x", config=VerifierConfig(model=ModelConfig(base_url=server.base_url))))
    assert "--model.model" not in str(caught.value)


def test_batch_progress_counts_verdicts_and_retries() -> None:
    import logging

    from debate.cli.verify import BatchProgress

    progress = BatchProgress()
    retry_log = logging.getLogger("debate.retry")
    retry_log.addHandler(progress)
    try:
        retry_log.warning("remote call failed (HTTP 503); retry 1 of 4")
    finally:
        retry_log.removeHandler(progress)
    from debate.results import ErrorInfo, ErrorRecord, ResultRecord
    from debate.testing import sample_report

    progress.add(ResultRecord(line=1, result=sample_report(["factual"])))
    progress.add(ResultRecord(line=2, result=sample_report(["non_factual"])))
    progress.add(ResultRecord(line=3, result=sample_report(["factual"])))
    progress.add(ErrorRecord(line=4, error=ErrorInfo(kind="input", message="line 4: bad")))
    assert progress.text() == "error 1 factual 2 non_factual 1  retries 1"


def test_no_debug_line_by_default(tmp_path: Path) -> None:
    """bm25s sets its own logger to DEBUG; nothing below WARNING reaches the terminal without -v."""
    article = tmp_path / "article.txt"
    article.write_text("The Eiffel Tower is in Paris. It was completed in 1889. It is 300 metres tall.\n")
    extract = Reply(content='{"claims": ["The Eiffel Tower is in Paris."]}')
    with FakeOpenAI(routes={"extract": [extract, extract], "debate": lambda call: Reply(content=op(True))}) as server:
        args = [
            "verify",
            "--task",
            "summarization",
            "--response",
            "The Eiffel Tower is in Paris.",
            "--reference",
            f"@{article}",
            "--retrieval.retriever",
            "bm25",
            "--model.base-url",
            server.base_url,
            "--model.model",
            "fake-model",
            "--brief",
        ]
        quiet, verbose = debate(*args), debate(*args, "-v")
    assert quiet.returncode == 0 and verbose.returncode == 0, quiet.stderr
    assert "DEBUG" not in quiet.stderr and "DEBUG" not in verbose.stderr, quiet.stderr


def test_version_answers_without_importing_the_engine() -> None:
    """`debate --version` is what people run first (and scripts run often): it answers from the package metadata,
    never importing the engine (seconds). benchmarks/bench_startup.py prints its time."""
    code = (
        "import sys; sys.argv = ['debate', '--version']; from markov_debate.console import main; main(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('debate', 'agents', 'experiments', 'desk')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["debate (markov-debate) 0.1.0", "[]"]
    full = subprocess.run([sys.executable, "-m", "debate.cli", "--version"], capture_output=True, text=True)
    assert full.stdout.strip() == "debate (markov-debate) 0.1.0"  # the same line as the full parser's


def test_every_flag_takes_hyphens_and_underscores_alike() -> None:
    """For every option of every command: the other spelling (each `-` after `--` as `_`, or the reverse) is the
    same flag, unless it is a flag of its own; and a parse with either gives the same result."""
    from debate.cli import build_parser
    from debate.cli.conventions import Parser, walk

    checked = 0
    for parser in walk(build_parser(["eval"])):
        assert isinstance(parser, Parser)
        known = parser._option_string_actions
        for flag in [f for f in known if f.startswith("--")]:
            body = flag[2:]
            for other in {f"--{body.replace('-', '_')}", f"--{body.replace('_', '-')}"} - {flag}:
                if other not in known:
                    assert parser.spelled([other, f"{other}=x"]) == [flag, f"{flag}=x"], (parser.prog, other)
                    checked += 1
    assert checked > 100
    base = ["verify", "--question", "q", "--answer", "a"]
    hyphens = build_parser(base).parse_args(
        [*base, "--debate.min-rounds", "2", "--max_cost", "1.5", "--prompt-set", "tuned"]
    )
    underscores = build_parser(base).parse_args(
        [*base, "--debate.min_rounds", "2", "--max_cost", "1.5", "--prompt_set", "tuned"]
    )
    assert vars(hyphens) == vars(underscores)
    [verify] = [p for p in walk(build_parser(base)) if p.prog == "debate verify"]
    assert isinstance(verify, Parser) and verify.spelled(["--max_cost"]) == ["--max-cost"]
    assert verify.spelled(["--", "--max_cost"]) == ["--", "--max_cost"]  # after --, nothing is a flag


def test_the_help_shows_one_spelling() -> None:
    """Every flag of every command is declared, and so shown in --help, --help-all and errors, with hyphens; the
    underscore spellings are accepted but never shown."""
    from debate.cli import build_parser
    from debate.cli.conventions import walk

    for parser in walk(build_parser(["eval"])):
        shown = [f for f in parser._option_string_actions if f.startswith("--")]
        assert not [f for f in shown if "_" in f], parser.prog
        parser.show_all = True  # type: ignore[attr-defined]
        assert not re.search(r"--[a-z][\w.-]*_", parser.format_help()), parser.prog
