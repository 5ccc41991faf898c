"""The Python API as a notebook uses it: verify() inside a running event loop, frames, exported errors."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import debate
from debate import ModelConfig, VerifierConfig, load_run, verify
from debate.plugins import TaskInput
from debate.results import ResultRecord
from debate.testing import sample_report
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import ROOT, op


def _config(base_url: str) -> VerifierConfig:
    return VerifierConfig(model=ModelConfig(base_url=base_url), debate=debate.DebateConfig(min_rounds=0))


def test_verify_works_inside_a_running_event_loop() -> None:
    """Jupyter runs cells inside an event loop, where asyncio.run() fails: verify() must still work."""
    with FakeOpenAI(responder=lambda body: Reply(content=op(True, 0, "supported"))) as server:

        async def cell() -> debate.Report:
            return verify(
                TaskInput("Paris", question="Capital of France?", reference="Paris is the capital."),
                config=_config(server.base_url),
            )

        report = asyncio.run(cell())
    assert report.verdict == "factual" and report.usage.llm_calls == 1


def test_report_to_dataframe_has_one_row_per_claim() -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(False, 4, "the reference says Paris"))) as server:
        report = verify(
            TaskInput("Lyon", question="Capital of France?", reference="Paris is the capital."),
            config=_config(server.base_url),
        )
    frame = report.to_dataframe()
    assert list(frame["label"]) == ["non_factual"] and list(frame["error_severity"]) == [4]
    assert frame.loc[0, "states"] == "S0" and frame.loc[0, "spans"] == [(0, 4)]
    assert frame.attrs["model"] == "fake-model"


def test_load_run_reads_run_folders_and_batch_outputs(tmp_path: Path) -> None:
    run = ROOT / "results" / "embedded-paper" / "ablate-transitions" / "true-to-skeptic"
    frame = load_run(run)
    assert len(frame) == frame.attrs["metrics"]["n"] == 12
    assert {"id", "label_factual", "pred_factual", "score", "verdict", "llm_calls"} <= set(frame.columns)
    assert "report" not in frame.columns
    batch = tmp_path / "out.jsonl"
    result = ResultRecord(id="a", response="x", line=1, result=sample_report(["factual"]))
    batch.write_text(result.to_json() + '\n{"line": 2, "error": {"kind": "input", "message": "line 2: bad"}}\n')
    rows = load_run(batch)
    assert list(rows["verdict"].fillna("-")) == ["factual", "-"] and rows.loc[1, "error"] == "line 2: bad"
    with pytest.raises(debate.InputError, match="not a run folder"):
        load_run(tmp_path)


@pytest.mark.slow
def test_errors_are_exported_and_embedded_start_is_announced(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "DebateError",
        "ModelRequestError",
        "ModelUnavailableError",
        "UsageError",
        "InputError",
        "ReplyUnusableError",
        "EmbeddedModelError",
    ):
        assert issubclass(getattr(debate, name), debate.DebateError)
    from debate.llm import _embedded as embedded

    started: list[list[str]] = []

    class Spawned(Exception):
        pass

    def popen(cmd: list[str], **kwargs: object) -> None:
        started.append(cmd)
        raise Spawned  # the message must be out before the process is

    monkeypatch.setattr(embedded, "embedded_model_path", lambda: Path("model.gguf"))
    monkeypatch.setattr("subprocess.Popen", popen)
    server = embedded.EmbeddedServer()
    with caplog.at_level(logging.WARNING, logger="debate.llm._embedded"), pytest.raises(Spawned):
        server.start()
    assert started and "llama_cpp.server" in started[0]
    (message,) = [r.getMessage() for r in caplog.records if r.name == "debate.llm._embedded"]
    assert message.startswith("no endpoint configured: starting the embedded model SmolLM2-135M-Instruct-Q4_1")
    assert "takes " in message and "ModelConfig.base_url" in message


def test_an_unreachable_endpoint_raises_the_projects_error_with_a_hint() -> None:
    """The Python API's user sees one error of ours, saying what to set, not aiohttp's chain of causes."""
    config = debate.VerifierConfig(
        model=debate.ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", max_attempts=2, backoff_initial_s=0.01)
    )
    with pytest.raises(debate.ModelUnavailableError) as caught:
        debate.verify(
            TaskInput("Christopher Marlowe", question="Who wrote Hamlet?", reference="Hamlet."), config=config
        )
    message = str(caught.value)
    assert message.startswith("nothing answers at http://127.0.0.1:9/v1 (connection refused by 127.0.0.1:9")
    assert "is the server running? check ModelConfig.base_url" in message and "ssl:default" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_public_api_names_every_config_the_client_interface_and_the_version() -> None:
    for name in (
        "ClaimConfig",
        "RetrievalConfig",
        "PrefilterConfig",
        "SearchConfig",
        "TelemetryConfig",
        "ChatClient",
        "ScriptedChatClient",
        "__version__",
    ):
        assert name in debate.__all__ and hasattr(debate, name), name
    assert debate.__version__ == debate.provenance.package_version()
    assert isinstance(debate.ScriptedChatClient([]), debate.ChatClient)


def test_verify_takes_what_the_verifier_takes() -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(True, 0, "supported"))) as server:
        report = verify(
            TaskInput(
                "Paris. It is big.",
                question="About Paris",
                reference="Paris is the capital.",
                claims=["Paris is a capital."],
                id="item-7",
            ),
            config=_config(server.base_url),
        )
    assert [c.text for c in report.claims] == ["Paris is a capital."]
    assert {h.get("x-debate-item") for h in server.headers} == {"item-7"}


def test_a_serper_search_without_a_key_is_refused_when_configured() -> None:
    with pytest.raises(ValueError, match="the serper search backend needs an API key"):
        debate.SearchConfig(backend="serper")


def test_task_input_is_the_one_input_and_the_earlier_keywords_still_work_for_a_release() -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(True, 0, "supported"))) as server:
        config = _config(server.base_url)
        given = verify(
            TaskInput("Paris", question="Capital of France?", reference="Paris is the capital."), config=config
        )
        with pytest.warns(DeprecationWarning, match="pass TaskInput"):
            earlier = verify(
                "Paris", question="Capital of France?", reference="Paris is the capital.", item_id="a", config=config
            )
        alone = verify("Paris is the capital of France.", config=config)
    assert given.verdict == earlier.verdict == alone.verdict == "factual"
    assert given.claims[0].text == earlier.claims[0].text
    with pytest.raises(debate.InputError, match="not as keywords"):
        verify(TaskInput("Paris"), question="Capital of France?", config=config)
    with pytest.raises(TypeError, match="unexpected keyword argument 'refrence'"):
        verify("Paris", refrence="typo", config=config)
    with pytest.raises(debate.InputError, match="item: expected a TaskInput, got int"):
        verify(42, config=config)  # type: ignore[arg-type]
    with pytest.raises(debate.InputError, match="id: expected text or None, got int"):
        verify(TaskInput("Paris", id=7), config=config)  # type: ignore[arg-type]
