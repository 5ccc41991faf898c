"""Cost before the run: `--estimate` (no model call; calls from the chain's exact expectation, fitted from a pilot
run's transcripts), `--max-cost` (a batch stops cleanly before it would pass the limit, and resumes), and the
run's actual tokens and cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debate.config import ModelConfig
from debate.engine import load_chain
from debate.pipeline import Price, cost_of, price_for
from debate.pipeline._behaviour import assumed_behaviour, debate_turns
from debate.types import Usage
from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import ROOT, debate, op

# The README's batch (docs/cli.md): one right answer, one wrong.
README_BATCH = [
    {
        "id": "q1",
        "question": "When was the Eiffel Tower completed?",
        "response": "In 1889.",
        "reference": "It was completed in 1889.",
    },
    {
        "id": "q2",
        "question": "How tall is the Eiffel Tower?",
        "response": "It is 1925 metres tall.",
        "reference": "It is 300 metres tall.",
    },
]
PILOT = [
    {"id": f"p{k}", "question": f"Capital of country {k}?", "response": answer, "reference": "Paris and Rome."}
    for k, answer in enumerate(["Paris", "Lyon", "Rome", "Milan", "Paris", "Nice", "Rome", "Turin"])
]
TRUE_ANSWERS = ("Answer: In 1889.", "Answer: Paris", "Answer: Rome")


def _agent(call: Call) -> Reply:
    """Rule-based agents: the Trust agent always says true; every other role says the truth. A wrong answer then
    never reaches agreement and runs to max rounds; a right one agrees at min rounds."""
    first = next(m["content"] for m in call.body["messages"] if m["role"] == "user")
    truth = any(answer in first for answer in TRUE_ANSWERS)
    said = True if call.purpose == "debate:trust" else truth
    return Reply(content=op(said, 0 if said else 3, "checked"))


ROUTES: dict[str, Route] = {"debate": _agent}


def _write(path: Path, items: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def test_the_chains_range_of_turns() -> None:
    chain = load_chain("true-to-skeptic")
    turns = debate_turns(assumed_behaviour(1.0), chain, 2, 5)
    assert (turns.low, turns.expected, turns.high) == (7.0, 7.0, 16.0)  # S0 + 2 rounds of 3; S0 + 5 rounds of 3
    assert 7.0 < debate_turns(assumed_behaviour(0.9), chain, 2, 5).expected < 16.0


@pytest.mark.slow
def test_estimate_from_a_pilot_predicts_the_readme_batchs_calls(tmp_path: Path) -> None:
    pilot, pilot_out = _write(tmp_path / "pilot.jsonl", PILOT), tmp_path / "pilot-out.jsonl"
    batch, batch_out = _write(tmp_path / "answers.jsonl", README_BATCH), tmp_path / "verdicts.jsonl"
    with FakeOpenAI(routes=ROUTES) as server:
        ran = debate("verify", "--input", str(pilot), "--output", str(pilot_out), "--model.base-url", server.base_url)
        assert ran.returncode == 0, ran.stderr
        before = len(server.calls)
        estimated = debate(
            "verify",
            "--input",
            str(batch),
            "--output",
            str(batch_out),
            "--estimate",
            "--estimate-from",
            str(pilot_out),
            "--model.base-url",
            server.base_url,
            "--json",
        )
        assert estimated.returncode == 0, estimated.stderr
        assert len(server.calls) == before  # the estimate called no model
        ran = debate("verify", "--input", str(batch), "--output", str(batch_out), "--model.base-url", server.base_url)
        assert ran.returncode == 0, ran.stderr
        actual = len(server.calls) - before
    figures = json.loads(estimated.stdout)
    assert actual == 7 + 16  # the right answer agrees at min rounds, the wrong one runs to max
    assert abs(figures["calls"]["expected"] - actual) <= 0.05 * actual
    assert figures["calls"]["low"] <= actual <= figures["calls"]["high"]
    assert figures["behaviour"].startswith(f"fitted from {pilot_out} (8 debates")


@pytest.mark.slow
def test_estimate_without_a_pilot_says_what_it_assumes(tmp_path: Path) -> None:
    batch = _write(tmp_path / "answers.jsonl", README_BATCH)
    done = debate(
        "verify",
        "--input",
        str(batch),
        "--output",
        str(tmp_path / "v.jsonl"),
        "--estimate",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
        "--model.model",
        "gpt-4o-mini",
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "no model was called" in text and "assumed: agents keep the verdict they are shown 90% of the time" in text
    assert "model calls: " in text and "(range 14 to " in text
    assert "list price as of 2025-06" in text and "cost: $" in text
    assert "not in Latin script" not in text
    hebrew = debate(
        "verify",
        "--answer",
        "פריז היא בירת צרפת.",
        "--question",
        "מהי בירת צרפת?",
        "--estimate",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
    )
    assert "some responses are not in Latin script (he): a token covers fewer characters" in " ".join(
        hebrew.stdout.split()
    )
    unpriced = debate(
        "verify",
        "--answer",
        "Paris",
        "--question",
        "Capital?",
        "--estimate",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
        "--model.model",
        "my-model",
    )
    assert "no price known for model my-model: give --model.price-in/--model.price-out" in " ".join(
        unpriced.stdout.split()
    )


def test_prices() -> None:
    table = price_for(ModelConfig(base_url="http://x/v1", model="gpt-4o-mini-2024-07-18"))
    assert table == Price(input=0.15, output=0.60, source="table")
    given = price_for(ModelConfig(base_url="http://x/v1", model="gpt-4o", price_in=1.0, price_out=2.0))
    assert given is not None and given.source == "given"
    assert price_for(ModelConfig(base_url="http://x/v1", model="llama-3")) is None
    assert (
        cost_of(Usage(prompt_tokens=1_000_000, completion_tokens=500_000), Price(input=2, output=8, source="given"))
        == 6.0
    )


@pytest.mark.slow
def test_max_cost_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    items = [{"id": f"q{k}", "question": "Capital?", "response": "Paris", "reference": "Paris."} for k in range(6)]
    batch, out = _write(tmp_path / "in.jsonl", items), tmp_path / "out.jsonl"
    # Each call reports 700 + 80 tokens; at $100 per million tokens an item (7 calls: the agents agree, within 2
    # rounds, no re-ask) costs $0.546, and the most the estimate allows an item is near that (or what an item
    # cost, once one finished): the first two items fit under $1.20, a third would pass it.
    prices = ["--model.price-in", "100", "--model.price-out", "100", "--items", "1", "--model.max-concurrency", "1"]
    prices += ["--debate.max-rounds", "2", "--debate.max-parse-retries", "0", "--model.max-tokens", "80"]

    def costly(call: Call) -> Reply:
        return Reply(content=op(True, 0, "checked"), usage=(700, 80))

    with FakeOpenAI(routes={"debate": costly}) as server:
        stopped = debate(
            "verify",
            "--input",
            str(batch),
            "--output",
            str(out),
            "--model.base-url",
            server.base_url,
            "--max-cost",
            "1.2",
            *prices,
        )
        assert stopped.returncode == 4, stopped.stderr
        assert len(out.read_text().splitlines()) == 2
        text = " ".join(stopped.stderr.split())
        said = "stopped before line 3: --max-cost $1.2: $1.0920 spent, 0 item(s) running, each item reserved at $0.5"
        assert said in text, text
        assert "usage: 14 model calls, 9,800 input and 1,120 output tokens, $1.0920 at $100 in / $100 out" in text
        resumed = debate(
            "verify",
            "--input",
            str(batch),
            "--output",
            str(out),
            "--model.base-url",
            server.base_url,
            "--max-cost",
            "10",
            *prices,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [item["id"] for item in items]


@pytest.mark.slow
def test_eval_estimates_a_benchmark_run_without_calling_a_model() -> None:
    data = str(ROOT / "tests" / "fixtures" / "data")
    common = (
        "eval",
        "halueval",
        "--task",
        "qa",
        "--n",
        "4",
        "--data-dir",
        data,
        "--estimate",
        "--model.base-url",
        "http://127.0.0.1:9/v1",
    )
    done = debate(*common, "--agreement", "1")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "estimate for 4 item(s), 4 claim(s)" in text and "model calls: 28 (range 28 to " in text
    refused = debate(*common, "--method", "halueval-judge")
    assert refused.returncode == 2 and "halueval-judge makes its own" in refused.stderr
