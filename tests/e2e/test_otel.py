"""Tracing (extra `otel`): a real Phoenix server on 127.0.0.1 receives `debate verify`'s traces over OTLP/HTTP and
`debate export phoenix`'s traces and annotations; both are read back through Phoenix's REST API. Off, tracing
imports nothing of the OpenTelemetry SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from debate.plugins import TaskInput
from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import cli_env, debate, op
from tests.support.phoenix import Phoenix, need, start_phoenix

pytestmark = [pytest.mark.otel, pytest.mark.slow]


def _paris_only(call: Call) -> Reply:
    """A rule-based agent: the answer "Paris" is right, any other is wrong."""
    return Reply(content=op("Answer: Paris" in call.asked, 0 if "Answer: Paris" in call.asked else 3, "checked"))


ROUTES: dict[str, Route] = {"debate": _paris_only}
ITEMS = [
    {"id": "right", "question": "Capital of France?", "response": "Paris", "reference": "Paris is the capital."},
    {"id": "wrong", "question": "Capital of France?", "response": "Lyon", "reference": "Paris is the capital."},
]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    yield from start_phoenix(tmp_path_factory.mktemp("phoenix"))


def _batch(tmp_path: Path, *extra: str) -> tuple[Path, FakeOpenAI]:
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    with FakeOpenAI(routes=ROUTES) as server:
        done = debate(
            "verify", "--input", str(source), "--output", str(output), "--model.base-url", server.base_url, *extra
        )
    assert done.returncode == 0, done.stderr
    return output, server


def _events(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["attributes"] for e in span["events"] if e["name"] == "gen_ai.evaluation.result"]


def test_verify_sends_one_trace_per_response_with_evaluations(phoenix: Phoenix, tmp_path: Path) -> None:
    _, server = _batch(tmp_path, "--telemetry.endpoint", phoenix.url, "--telemetry.project", "verify-run")
    spans = phoenix.spans("verify-run", at_least=2 + len(server.calls))
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = [s for s in spans if s["name"] == "verify"]
    assert len(roots) == 2 and len({r["context"]["trace_id"] for r in roots}) == 2
    verdicts = {r["attributes"]["debate.item"]: _events(r)[0] for r in roots}
    assert verdicts["right"]["gen_ai.evaluation.score.label"] == "factual"
    assert verdicts["wrong"]["gen_ai.evaluation.score.label"] == "non_factual"
    assert verdicts["wrong"]["gen_ai.evaluation.score.value"] < 0.5 < verdicts["right"]["gen_ai.evaluation.score.value"]

    claims = [s for s in spans if s["name"].startswith("claim ")]
    assert {s["span_kind"] for s in claims} == {"EVALUATOR"} and len(claims) == 2
    assert sorted(_events(c)[0]["gen_ai.evaluation.score.value"] for c in claims) == [0.0, 1.0]
    assert all(_events(c)[0]["gen_ai.evaluation.explanation"] == "checked" for c in claims)

    calls = [s for s in spans if s["span_kind"] == "LLM"]
    assert len(calls) == len(server.calls)  # one LLM span per model call, no more
    first = calls[0]["attributes"]
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.request.model"] == "fake-model"
    assert first["gen_ai.usage.input_tokens"] == 11 and first["gen_ai.usage.output_tokens"] == 7
    assert first["llm.token_count.total"] == 18 and first["debate.purpose"].startswith("debate:")

    def ancestry(span: dict[str, Any]) -> list[str]:
        names = []
        while span.get("parent_id"):
            span = by_id[span["parent_id"]]
            names.append(span["name"].split(" ")[0])
        return names

    # Each model call sits under its turn, round, the claim's debate, the claim and the response.
    assert all(ancestry(c)[:6] == ["turn", "round", "debate", "claim", "verify"] for c in calls)
    assert {s["span_kind"] for s in spans} >= {"CHAIN", "RETRIEVER", "AGENT", "EVALUATOR", "LLM"}


def test_the_standard_otlp_variable_turns_tracing_on(phoenix: Phoenix) -> None:
    with FakeOpenAI(routes=ROUTES) as server:
        env = {**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "debate.cli",
                "verify",
                "--question",
                "Capital of France?",
                "--answer",
                "Paris",
                "--evidence",
                "Paris is the capital.",
                "--model.base-url",
                server.base_url,
                "--telemetry.project",
                "from-env",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    roots = [s for s in phoenix.spans("from-env", at_least=len(server.calls) + 1) if s["name"] == "verify"]
    assert len(roots) == 1 and _events(roots[0])[0]["gen_ai.evaluation.score.label"] == "factual"


def test_export_sends_traces_and_annotations_with_human_reviews(phoenix: Phoenix, tmp_path: Path) -> None:
    output, _ = _batch(tmp_path)
    records = [json.loads(line) for line in output.read_text().splitlines()]
    wrong = next(r for r in records if r["id"] == "wrong")
    review = {
        "claim_id": wrong["result"]["claims"][0]["claim_id"],
        "reviewer": "dana",
        "decision": "agree",
        "label": "non_factual",
        "engine_label": "non_factual",
        "note": "Lyon is not the capital",
        "created_at": "2026-11-25T10:00:00Z",
    }
    desk = tmp_path / "desk-export.jsonl"
    desk.write_text(
        json.dumps({"audit_id": 7, "report": wrong["result"], "reviews": [review]}) + "\n{broken\n"
    )  # a desk export's line, then a line that is nothing
    done = debate("export", "phoenix", str(output), "--url", phoenix.url, "--project", "exported")
    assert done.returncode == 0, done.stderr
    assert "sent 2 trace(s), 4 span(s) and 4 annotation(s) (0 human)" in " ".join(done.stderr.split())
    desk_done = debate("export", "phoenix", str(desk), "--url", phoenix.url, "--project", "reviewed")
    assert desk_done.returncode == 0, desk_done.stderr
    # rich wraps at 80 columns, anywhere in a long path (a worker's temporary folder is longer): compare unwrapped
    assert f"{desk}line2:notvalidJSON" in "".join(desk_done.stderr.split())

    spans = phoenix.spans("exported", at_least=4)
    annotations = phoenix.annotations("exported", [s["context"]["span_id"] for s in spans])
    labels = sorted((a["name"], a["annotator_kind"], a["result"]["label"]) for a in annotations)
    assert labels == [
        ("claim_factuality", "LLM", "factual"),
        ("claim_factuality", "LLM", "non_factual"),
        ("hallucination", "LLM", "factual"),
        ("hallucination", "LLM", "non_factual"),
    ]
    reviewed = phoenix.spans("reviewed", at_least=2)
    human = [
        a
        for a in phoenix.annotations("reviewed", [s["context"]["span_id"] for s in reviewed])
        if a["annotator_kind"] == "HUMAN"
    ]
    assert len(human) == 1 and human[0]["result"] == {
        "label": "non_factual",
        "score": 1.0,
        "explanation": "Lyon is not the capital",
    }
    assert human[0]["metadata"]["reviewer"] == "dana"
    claim_span = next(s for s in reviewed if s["context"]["span_id"] == human[0]["span_id"])
    assert claim_span["name"].startswith("claim ")


def test_tracing_off_imports_no_sdk_and_makes_no_spans() -> None:
    need("opentelemetry.sdk")
    script = (
        "import sys, json\n"
        "from debate.pipeline._verifier import Verifier\n"
        "from debate.testing import ScriptedChatClient\n"
        "from debate import telemetry\n"
        "import asyncio\n"
        f"reply = {op(True)!r}\n"
        "client = ScriptedChatClient({'debate': [reply] * 20})\n"
        "async def main():\n"
        "    async with Verifier(client=client) as v:\n"
        "        report = await v.verify('Paris', question='Capital?', reference='Paris is the capital.')\n"
        "    print(report.verdict, telemetry.active(), 'opentelemetry.sdk' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    env = {k: v for k, v in cli_env().items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["factual", "False", "False"]


def test_a_bad_otlp_endpoint_is_one_line() -> None:
    done = debate(
        "verify",
        "--answer",
        "Paris",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
        "--telemetry.endpoint",
        "localhost:4318",
    )
    assert done.returncode == 2
    assert "OTLP endpoint 'localhost:4318' is not an http(s) URL" in done.stderr


async def test_failures_are_span_errors_and_never_a_verdict() -> None:
    """In process, with an in-memory exporter: an endpoint that fails a turn marks that model call's span as an
    error, and the claim's evaluation says unverifiable, with no score."""
    need("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from debate import telemetry
    from debate.errors import ModelUnavailableError
    from debate.pipeline import Verifier
    from debate.testing import ScriptedChatClient

    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    try:
        client = ScriptedChatClient({"debate": [ModelUnavailableError("the endpoint is down")]})
        async with Verifier(client=client) as verifier:
            report = await verifier.verify(TaskInput("Paris", question="Capital?", reference="Paris is the capital."))
    finally:
        telemetry.shutdown()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert report.verdict == "unverifiable"
    failed = spans["chat scripted"]
    assert failed.status.status_code.name == "ERROR" and "the endpoint is down" in (failed.status.description or "")
    (event,) = [e for e in spans["claim c0"].events if e.name == "gen_ai.evaluation.result"]
    assert event.attributes is not None
    assert event.attributes["gen_ai.evaluation.score.label"] == "unverifiable"
    assert "gen_ai.evaluation.score.value" not in event.attributes
    assert "the endpoint is down" in str(event.attributes["gen_ai.evaluation.explanation"])
    assert not telemetry.active()
