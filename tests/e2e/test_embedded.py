"""The real embedded model (SmolLM2-135M on llama.cpp) end to end. It proves the pipeline runs; it says nothing
about the method's accuracy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.llm._embedded import EMBEDDED_MAX_STRING_CHARS
from debate.plugins import TaskInput
from tests.support.helpers import FIXTURES, sigint_default

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
KNOWLEDGE = (
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia in the 19th "
    "century. First for Women is a woman's magazine published by Bauer Media Group in the USA. It was started in 1989."
)


def test_cli_verifies_on_the_embedded_model_with_no_endpoint() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "debate.cli",
            "verify",
            "--question",
            QUESTION,
            "--answer",
            "First for Women",
            "--evidence",
            KNOWLEDGE,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "embedded" in done.stderr and "SmolLM2" in done.stderr
    report = json.loads(done.stdout)
    assert report["meta"]["embedded"] is True and report["meta"]["model"].startswith("SmolLM2-135M")
    assert report["meta"]["base_url"].startswith("http://127.0.0.1:")
    claim = report["claims"][0]
    # The grammar-constrained JSON reply parses (a reply cut at the token limit is re-asked), so every turn ends
    # with an opinion.
    assert claim["status"] == "verified" and isinstance(claim["factual"], bool)
    assert report["factual"] is claim["factual"]
    debate = claim["debate"]
    assert 2 <= debate["rounds"] <= 5
    assert debate["states"][0]["name"] == "S0" and all(s["name"] in ("S1", "S2") for s in debate["states"][1:])
    for state in debate["states"][1:]:
        assert [t["role"] for t in state["turns"]][-1] == "leader" and len(state["turns"]) == 3
    attempts = sum(t["call"]["attempts"] for s in debate["states"] for t in s["turns"])
    assert report["usage"]["llm_calls"] == attempts >= 1 + 3 * debate["rounds"]
    assert report["usage"]["prompt_tokens"] > 0 and report["usage"]["completion_tokens"] > 0


async def test_api_on_the_embedded_server_records_every_turn(embedded_server: str) -> None:
    config = VerifierConfig(
        # strings bounded as the embedded default bounds them: unbounded, the 135M model runs replies to the token limit
        model=ModelConfig(
            base_url=embedded_server,
            structured_output="json_object",
            max_concurrency=1,
            max_string_chars=EMBEDDED_MAX_STRING_CHARS,
        ),
        debate=DebateConfig(min_rounds=1, max_rounds=2, chain="always-trust"),
    )
    async with Verifier(config=config) as verifier:
        report = await verifier.verify(TaskInput("Arthur's Magazine", question=QUESTION, reference=KNOWLEDGE))
    claim = report.claims[0]
    assert claim.status == "verified"
    assert claim.debate is not None
    assert [s.name for s in claim.debate.states][1:] == ["S1"] * claim.debate.rounds
    turns = [t for s in claim.debate.states for t in s.turns]
    assert all(t.opinion and t.call.usage.llm_calls >= 1 and t.call.latency_s > 0 for t in turns)
    assert report.meta.model == "SmolLM2-135M-Instruct-Q4_1" and report.meta.embedded is False


async def test_summarization_item_end_to_end(embedded_server: str) -> None:
    """Extraction, dense top-10 retrieval over a real HaluEval document, and a debate per claim, all for real."""

    from debate.config import ClaimConfig, RetrievalConfig

    record = json.loads((FIXTURES / "halueval_summarization_icc.jsonl").read_text())
    summary = (
        "Membership gives the ICC jurisdiction over alleged crimes committed in Palestinian territories since "
        "last June. Israel and the United States supported the move."
    )
    config = VerifierConfig(
        # the strings bounded as the embedded default bounds them (EMBEDDED_MAX_STRING_CHARS): unbounded, the 135M
        # model ran replies to the token limit and the test to 216 s in CI
        model=ModelConfig(
            base_url=embedded_server,
            structured_output="json_object",
            max_concurrency=1,
            max_string_chars=EMBEDDED_MAX_STRING_CHARS,
        ),
        debate=DebateConfig(min_rounds=1, max_rounds=1),
        claims=ClaimConfig(max_claims=2),
        retrieval=RetrievalConfig(retriever="dense", top_k=10),
    )
    async with Verifier(config=config) as verifier:
        report = await verifier.verify(TaskInput(summary, reference=record["document"]), task="summarization")
    assert report.task == "summarization" and report.extraction.method == "llm-sentences"
    assert 1 <= len(report.claims) <= 2
    document = " ".join(record["document"].split())
    calls = 1
    for claim in report.claims:
        assert len(claim.evidence) == 10
        assert all(e.kind == "document" and e.text in document for e in claim.evidence)
        assert claim.debate is not None
        if claim.status == "verified":
            assert claim.debate.rounds == 1
            calls += 4
        else:
            # The 135M model sometimes runs a constrained reply to the token limit (cut mid-string): the bounded
            # re-asks happen and the claim is unverifiable, never guessed.
            assert claim.failure is not None and claim.failure.kind == "reply_unusable"
            calls += claim.debate.states[0].turns[0].call.attempts
    assert any(c.status == "verified" for c in report.claims)
    assert report.usage.llm_calls == calls
    assert report.score is not None and report.verdict in ("factual", "non_factual", "unverifiable")


async def test_logprob_prefilter_reads_real_logprobs_from_llama_cpp(embedded_server: str) -> None:
    from debate.config import PrefilterConfig

    config = VerifierConfig(
        model=ModelConfig(base_url=embedded_server, structured_output="json_object", max_concurrency=1),
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(prefilters=["logprob"]),
    )
    async with Verifier(config=config) as verifier:
        report = await verifier.verify(
            TaskInput(
                "Paris is the capital of France [1]. The Eiffel Tower stands in Berlin [2].",
                reference={
                    "1": "Paris is the capital and largest city of France.",
                    "2": "The Eiffel Tower is a tower.",
                },
            ),
            task="rag",
        )
    assert report.prefilter is not None and report.prefilter.note is None  # llama.cpp returns logprobs
    assert [c.prefilters[0].decision for c in report.claims] == ["pass", "pass"]
    for claim in report.claims:
        r = claim.prefilters[0].grounding
        assert r is not None and 0.0 <= r.p0 <= 1.0 and 0.0 <= r.p1 <= 1.0 and r.has_citations
        assert r.budget_gap_bits == pytest.approx(r.observed_bits - r.required_bits)  # seed 002
    assert report.prefilter.prefilter_calls == 4  # p1 and p0 for each cited claim


def _llama_servers() -> set[int]:
    """Pids of running llama.cpp server processes (any parent)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if b"llama_cpp.server" in cmdline:
            found.add(int(entry))
    return found


def _wait_gone(pids: set[int], timeout_s: float = 15.0) -> set[int]:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and pids & _llama_servers():
        time.sleep(0.1)
    return pids & _llama_servers()


@pytest.mark.parametrize("cancel_after_s", [0.3, 2.5])
async def test_cancelling_at_any_point_leaves_no_llama_process(cancel_after_s: float, no_endpoint_env: None) -> None:
    """Cancelled while the server starts (0.3 s) or while a claim is being debated (2.5 s): the process is gone."""
    import asyncio

    before = _llama_servers()

    async def run() -> None:
        async with Verifier(config=VerifierConfig()) as verifier:
            await verifier.verify(TaskInput("Arthur's Magazine", question=QUESTION, reference=KNOWLEDGE))

    task = asyncio.create_task(run())
    await asyncio.sleep(cancel_after_s)
    started = _llama_servers() - before
    assert started, "the embedded server should be running (or starting) by now"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _wait_gone(started) == set()


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (signal.SIGINT, 130, "debate: interrupted"),  # Ctrl-C during start-up
        (signal.SIGTERM, 143, "debate: terminated"),
        (signal.SIGKILL, -9, None),  # no chance to clean up: the kernel ends the server with its parent (Linux)
    ],
)
def test_a_signal_during_startup_leaves_no_llama_process(signum: int, code: int, line: str | None) -> None:
    import time

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    before = _llama_servers()
    proc = subprocess.Popen(
        [sys.executable, "-m", "debate.cli", "verify", "--question", QUESTION, "--answer", "First for Women"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_default,
    )
    deadline = time.monotonic() + 60
    while not (_llama_servers() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = _llama_servers() - before
    assert started, "the CLI should have spawned the embedded server"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    if line is not None:
        assert err.decode().strip().splitlines()[-1] == line and b"Traceback" not in err
    assert _wait_gone(started) == set()


def test_the_tour_shows_a_finished_debate_on_the_embedded_model() -> None:
    """Bounded strings in the grammar and a token limit that fits the schema: the 135M model's replies always
    close, so the tour's debate runs to its end and prints its chain (its verdict is the model's, not checked)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    done = subprocess.run(
        [sys.executable, "-m", "debate.cli", "tour"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env | {"COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "the machinery, not the method's accuracy" in done.stderr
    assert "chain: S0 (initial said" in done.stdout, done.stdout
    assert "stopped: consensus" in done.stdout or "stopped: max_rounds" in done.stdout, done.stdout
    assert "unverifiable" not in done.stdout and "no JSON object" not in done.stdout, done.stdout
