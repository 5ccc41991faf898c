"""Experiment runs: each method's call pattern, resume, the call cache, Ray fan-out, ablations and reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from debate.config import DebateConfig, RetrievalConfig, VerifierConfig
from debate.errors import UsageError
from debate.llm import ChatRequest
from debate.testing import ScriptedChatClient, ScriptExhaustedError
from experiments.runner import RunSpec, items_for, run_experiment
from tests.support.calibration import calibration, save_calibration
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import FIXTURES, op

pytestmark = pytest.mark.slow  # starts processes

DATA = FIXTURES / "data"


def spec(method: str = "mcmad", *, task: str = "qa", n: int = 4, **verifier: Any) -> RunSpec:
    return RunSpec(
        benchmark="halueval",
        task=task,
        n=n,
        seed=0,
        method=method,
        data_dir=str(DATA),
        verifier=VerifierConfig(claim_concurrency=1, **verifier),
    )


def provenance(verifier: Any, prompts: dict[str, str]) -> dict[str, Any]:
    return {
        "spec_digest": CURRENT["spec"].digest(),
        "spec": CURRENT["spec"].model_dump(mode="json"),
        "model": verifier.client.model_name,
        "prompts": prompts,
    }


CURRENT: dict[str, RunSpec] = {}


async def run(s: RunSpec, folder: Path, client: ScriptedChatClient) -> dict[str, Any]:
    CURRENT["spec"] = s
    return await run_experiment(s, run_dir=folder, concurrency=1, provenance=provenance, client=client)


def _two_claims(summary: str) -> str:
    """An extractor's reply: two claims taken from the summary itself."""
    words = summary.split()
    return json.dumps({"claims": [" ".join(words[:8]), " ".join(words[8:16])]})


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def agree(request: ChatRequest) -> str:
    return op(True)


async def test_mcmad_runs_the_full_chain_per_item(tmp_path: Path) -> None:
    client = ScriptedChatClient([agree] * 28)
    metrics = await run(spec("mcmad"), tmp_path, client)
    rows = records(tmp_path)
    assert len(rows) == 4 and all(r["llm_calls"] == 7 and r["decided_by"] == "debate" for r in rows)
    assert len(client.calls) == 28 and metrics["llm_calls_per_item"] == 7.0
    assert set(rows[0]) >= {"id", "task", "label_factual", "pred_factual", "score", "decided_by", "llm_calls", "report"}
    assert rows[0]["report"]["claims"][0]["debate"]["rounds"] == 2
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert set(saved["baselines"]) == {"length-only", "majority-class", "tuning"}
    assert _has_row((tmp_path / "results.md").read_text(), "length-only", "4")


async def test_an_eval_with_a_calibration_records_p_factual_in_every_row(tmp_path: Path) -> None:
    cal = save_calibration(tmp_path, calibration())
    client = ScriptedChatClient([agree] * 8)
    await run(spec("mcmad", debate=DebateConfig(calibration=cal, stop="posterior:0.9")), tmp_path / "run", client)
    rows = records(tmp_path / "run")
    assert len(client.calls) == 8  # two turns per item: the posterior is decided after S2's first speaker
    assert all(r["p_factual"] == pytest.approx(0.48 / 0.51) == r["report"]["p_factual"] for r in rows)
    assert spec("mcmad").digest() != spec("mcmad", debate=DebateConfig(calibration=cal)).digest()


async def test_single_is_one_call_per_item(tmp_path: Path) -> None:
    client = ScriptedChatClient([agree] * 4)
    await run(spec("single"), tmp_path, client)
    assert len(client.calls) == 4 and all(r["llm_calls"] == 1 for r in records(tmp_path))


async def test_factool_is_one_call_per_claim(tmp_path: Path) -> None:
    s = spec("factool", task="summarization", n=2, retrieval=RetrievalConfig(retriever="bm25"))
    items = list(items_for(s))  # the claims must come from each summary itself: unsupported claims are dropped
    extracted = {f"extract@{item.id}": [_two_claims(item.response)] for item in items}
    verdict = json.dumps({"reasoning": "checked", "error": "none", "correction": "same", "factuality": True})
    script: dict[str, list[str]] = {**extracted, "factool": [verdict] * 4}
    client = ScriptedChatClient(script)
    await run(s, tmp_path, client)
    rows = records(tmp_path)
    assert [r["llm_calls"] for r in rows] == [3, 3]  # one extraction + one verification per claim
    assert all(r["pred_factual"] is True and r["score"] == 1.0 for r in rows)
    assert "factool_claims" in rows[0]["report"]["extraction"]["prompts"]  # Factool's own extraction prompt
    assert "fewer than 15 words" in client.calls[0].request.messages[0].content and client.remaining == 0


@pytest.mark.parametrize("method", ["self-check-0", "self-check-3"])
async def test_self_check_judges_each_claim_from_the_models_own_knowledge(tmp_path: Path, method: str) -> None:
    def reply(request: ChatRequest) -> str:
        assert request.purpose == "self-check"
        return json.dumps({"reasoning": "known", "error": "none", "correction": "same", "factuality": True})

    client = ScriptedChatClient([reply] * 4)
    await run(spec(method), tmp_path, client)
    rows = records(tmp_path)
    assert [r["llm_calls"] for r in rows] == [1, 1, 1, 1] and all(r["pred_factual"] is True for r in rows)
    sent = client.calls[0].request.messages
    assert "Evidence" not in sent[-1].content and "no evidence is given" in sent[0].content
    assert ("Example 3" in sent[0].content) == (method == "self-check-3")


async def test_halueval_judge_follows_halueval_protocol(tmp_path: Path) -> None:
    # HaluEval's rule: periods removed, "Yes"/"No" anywhere (case-sensitive); both or neither is a failure, scored
    # wrong; no re-ask, no constrained decoding, no knowledge for QA.
    client = ScriptedChatClient(["Yes.", "No", "Yes. No.", "maybe"])
    await run(spec("halueval-judge"), tmp_path, client)
    rows = records(tmp_path)
    assert [r["pred_factual"] for r in rows] == [False, True, None, None]
    assert rows[2]["error"] == 'the reply has both or neither of "Yes" and "No" (HaluEval counts it as failed)'
    assert [r["llm_calls"] for r in rows] == [1, 1, 1, 1]
    first = client.calls[0].request
    assert first.response_schema is None and first.purpose == "judge"
    assert first.messages[0].role == "system" and "hallucination detector" in first.messages[0].content
    assert "#Knowledge#" not in first.messages[-1].content
    assert first.messages[-1].content.rstrip().endswith("#Your Judgement#:")
    assert "#Question#:" in first.messages[-1].content and "#Answer#:" in first.messages[-1].content


async def test_halueval_judge_knowledge_is_an_option_named_in_the_run(tmp_path: Path) -> None:
    client = ScriptedChatClient(["No"] * 4)
    with_knowledge = spec("halueval-judge").model_copy(update={"judge_knowledge": True})
    await run(with_knowledge, tmp_path, client)
    assert "#Knowledge#:" in client.calls[0].request.messages[-1].content
    assert "-halueval-judge+knowledge-" in with_knowledge.name()


def test_claim_level_baselines_tune_on_claims_of_other_records() -> None:
    from experiments.baselines import tuning_pairs

    pairs = tuning_pairs("factprompts", "kbqa", data_dir=DATA, exclude_lines=set(range(2, 51)), seed=0, level="claim")
    first = json.loads((DATA / "factool" / "knowledge_qa.jsonl").read_text().splitlines()[0])
    assert pairs == [(len(c["claim"].strip()), c["label"]) for c in first["claims"]]


async def test_resume_after_interruption_finishes_only_missing_items(tmp_path: Path) -> None:
    with pytest.raises(ScriptExhaustedError):
        await run(spec("single"), tmp_path, ScriptedChatClient([agree] * 2))
    assert len(records(tmp_path)) == 2
    client = ScriptedChatClient([agree] * 2)
    await run(spec("single"), tmp_path, client)
    rows = records(tmp_path)
    assert len(client.calls) == 2 and len(rows) == 4 and len({r["id"] for r in rows}) == 4
    again = ScriptedChatClient([])
    await run(spec("single"), tmp_path, again)  # everything done: no call at all
    assert again.calls == []


async def test_cached_rerun_makes_no_endpoint_calls(tmp_path: Path) -> None:
    cache = str(tmp_path / "calls.sqlite")
    first = ScriptedChatClient([agree] * 28)
    metrics = await run(spec("mcmad", call_cache=cache), tmp_path / "a", first)
    # Round 2 repeats round 1's requests exactly (same inputs, temperature 0), so even the first run hits the cache:
    # 4 items x (S0 + one round of 3) endpoint calls, while each report still counts the method's 7 calls.
    assert len(first.calls) == 16 and all(r["llm_calls"] == 7 for r in records(tmp_path / "a"))
    silent = ScriptedChatClient([])  # any call would fail the run
    again = await run(spec("mcmad", call_cache=cache), tmp_path / "b", silent)
    assert silent.calls == [] and again["accuracy"] == metrics["accuracy"]
    assert [r["report"]["claims"] for r in records(tmp_path / "a")] == [
        r["report"]["claims"] for r in records(tmp_path / "b")
    ]


async def test_a_different_config_refuses_an_existing_run_folder(tmp_path: Path) -> None:
    await run(spec("single"), tmp_path, ScriptedChatClient([agree] * 4))
    with pytest.raises(UsageError, match=r"another configuration \(n: 4 -> 3\).*--overwrite"):
        await run(spec("single", n=3), tmp_path, ScriptedChatClient([]))
    config = json.loads((tmp_path / "config.json").read_text())
    config["prompts"]["initial"] = "0" * 64  # as if the prompt file had been edited since
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match=r"prompt files changed since this run started \(initial\)"):
        await run(spec("single"), tmp_path, ScriptedChatClient([]))


def _debate(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_ray_backend_shards_into_one_run_folder(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        done = _debate(
            "eval",
            "halueval",
            "--task",
            "qa",
            "--n",
            "6",
            "--method",
            "single",
            "--backend",
            "ray",
            "--shards",
            "2",
            "--data-dir",
            str(DATA),
            "--runs-root",
            str(tmp_path),
            "--out",
            str(tmp_path / "ray"),
            "--model.base-url",
            server.base_url,
            "--no-cache",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(server.requests) == 6
    rows = records(tmp_path / "ray")
    from experiments.data import halueval_items

    assert [r["id"] for r in rows] == [i.id for i in halueval_items("qa", data_dir=DATA, n=6, seed=0)]
    assert not list((tmp_path / "ray").glob("results.part-*"))
    assert (tmp_path / "ray" / "metrics.json").is_file() and (tmp_path / "ray" / "config.json").is_file()


def _rows(markdown: str) -> list[list[str]]:
    """The cells of a Markdown table's rows."""
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("|--")
    ]


def _has_row(markdown: str, *cells: str) -> bool:
    return any(row[: len(cells)] == list(cells) for row in _rows(markdown))


def test_eval_ablate_and_report_commands(tmp_path: Path) -> None:
    with FakeOpenAI(responder=lambda body: Reply(content=op(True))) as server:
        common = ["--data-dir", str(DATA), "--runs-root", str(tmp_path), "--model.base-url", server.base_url]
        host = server.base_url.split("/")[2]
        first = _debate("eval", "halueval", "--task", "qa", "--n", "4", "--method", "single", *common)
        assert first.returncode == 0, first.stderr[-2000:]
        assert _has_row(first.stdout, "single", "4") and _has_row(first.stdout, "length-only", "4")
        calls = len(server.requests)
        rerun = _debate("eval", "halueval", "--task", "qa", "--n", "4", "--method", "single", *common)
        assert rerun.returncode == 0 and len(server.requests) == calls  # resumed: nothing left to do
        facts = _debate("eval", "factprompts", "--level", "claim", "--n", "3", "--method", "single", *common)
        assert facts.returncode == 0, facts.stderr[-2000:]
        ablation = _debate("ablate", "transitions", "--n", "2", "--debate.max-rounds", "2", *common)
        assert ablation.returncode == 0, ablation.stderr[-2000:]
        rounds = _debate("ablate", "min-rounds", "--tasks", "qa", "--n", "2", *common)
        assert rounds.returncode == 0, rounds.stderr[-2000:]
        assert [_has_row(rounds.stdout, f"qa min_rounds={k}", "2") for k in range(4)] == [True] * 4
        # every ablation table carries the baselines its plots draw
        for folder in ("ablate-transitions", "ablate-min-rounds"):
            table = (tmp_path / folder / "table.md").read_text()
            assert _has_row(table, "length-only", "2") and _has_row(table, "majority-class", "2"), folder
            # redrawn from the finished runs alone: the same table, the plots back, no model call
            for made in (tmp_path / folder).glob("*.*"):
                made.unlink()
            before = len(server.requests)
            replot = _debate("ablate", "replot", str(tmp_path / folder))
            assert replot.returncode == 0, replot.stderr[-2000:]
            assert (tmp_path / folder / "table.md").read_text() == table and len(server.requests) == before
            assert len(list((tmp_path / folder).glob("*.svg"))) == 1
        assert (tmp_path / "ablate-min-rounds" / "min_rounds.png").read_bytes().startswith(b"\x89PNG")
        svg = (tmp_path / "ablate-min-rounds" / "min_rounds.svg").read_text()
        # accuracy and F1 side by side, n and the model in the title, the baselines as reference lines
        for text in (
            "accuracy (95% CI)",
            "F1 (factual) (95% CI)",
            "n = 2 per point",
            "model fake-model",
            "length-only",
            "majority-class",
        ):
            assert text in svg, text
        single_round = json.loads(
            (tmp_path / "ablate-min-rounds" / "qa-min0" / "results.jsonl").read_text().splitlines()[0]
        )
        assert single_round["llm_calls"] == 1  # min rounds 0: S0 decides
        sets = _debate("ablate", "prompt-set", "--n", "2", "--debate.min-rounds", "0", *common)
        assert sets.returncode == 0, sets.stderr[-2000:]
        assert _has_row(sets.stdout, "prompt set paper", "2") and _has_row(sets.stdout, "prompt set tuned", "2")
        paper_run = json.loads((tmp_path / "ablate-prompt-set-qa" / "paper" / "config.json").read_text())
        tuned_run = json.loads((tmp_path / "ablate-prompt-set-qa" / "tuned" / "config.json").read_text())
        assert (
            paper_run["resolved_config"]["prompt_set"] == "paper"
            and tuned_run["spec"]["verifier"]["prompt_set"] == "tuned"
        )
        assert paper_run["prompts"]["initial"] != tuned_run["prompts"]["initial"]
        asked = [r["messages"][0]["content"] for r in server.requests]
        assert any(m.startswith("You are a fact-checking agent.") for m in asked)  # the paper set's S0
        assert any(m.startswith("You are a careful fact-checker.") for m in asked)  # the tuned set's S0
    table = (tmp_path / "ablate-transitions" / "table.md").read_text()
    assert all(
        _has_row(table, rule, "2") for rule in ("true-to-skeptic", "true-to-trust", "always-skeptic", "always-trust")
    )
    png = (tmp_path / "ablate-transitions" / "transitions.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    runs = [
        p for p in tmp_path.iterdir() if p.name.endswith(tuple("0123456789abcdef")) and (p / "metrics.json").exists()
    ]
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text("{}")
    report = _debate("report", *map(str, runs), str(tmp_path / "ablate-transitions" / "always-trust"), str(unfinished))
    assert report.returncode == 0, report.stderr
    labels = [row[0] for row in _rows(report.stdout)[1:]]
    assert labels.count(f"halueval qa (knowledge given) · single · fake-model @ {host}") == 1
    assert f"halueval qa (knowledge given) · mcmad (chain always-trust) · fake-model @ {host}" in labels
    assert f"factprompts claim-level (no search: knowledge-free) · single · fake-model @ {host}" in labels
    # the two n=4 and n=2 QA samples are two settings; each shows its baselines once
    assert labels.count("halueval qa (knowledge given) · length-only") == 2
    assert f"skipped {unfinished}: not finished" in " ".join(report.stderr.split())
    as_json = json.loads(_debate("report", *map(str, runs), "--format", "json").stdout)
    assert {r["method"] for r in as_json} >= {"single", "length-only", "majority-class"}
    assert all(set(r) >= {"setting", "model", "endpoint", "n", "accuracy", "accuracy_ci95", "f1"} for r in as_json)
    as_csv = _debate("report", *map(str, runs), "--format", "csv").stdout.splitlines()
    assert as_csv[0].startswith("setting,method,model,endpoint,run,n,accuracy,accuracy_ci95") and len(
        as_csv
    ) == 1 + len(as_json)
    bad = _debate("report", str(tmp_path / "nope"))
    assert bad.returncode == 2 and "no finished run" in bad.stderr


def test_eval_defaults_to_the_papers_sample_sizes() -> None:
    from debate.cli import build_parser
    from experiments.cli_common import sample_size as _sample_size

    parser = build_parser(["eval"])
    sizes = {
        task: _sample_size(parser.parse_args(["eval", "halueval", "--task", task]))
        for task in ("qa", "dialogue", "summarization")
    }
    assert sizes == {"qa": 150, "dialogue": 150, "summarization": 50}
    assert _sample_size(parser.parse_args(["eval", "factprompts"])) is None  # all 50 responses / 233 claims
    assert _sample_size(parser.parse_args(["eval", "halueval", "--task", "qa", "--n", "all"])) is None
    assert _sample_size(parser.parse_args(["eval", "halueval", "--task", "qa", "--n", "12"])) == 12


@pytest.mark.embedded
def test_short_real_run_on_the_embedded_model(tmp_path: Path) -> None:
    done = _debate(
        "eval",
        "halueval",
        "--task",
        "qa",
        "--n",
        "2",
        "--method",
        "single",
        "--data-dir",
        str(DATA),
        "--runs-root",
        str(tmp_path),
        "--no-cache",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    config = json.loads((folder / "config.json").read_text())
    assert config["embedded"] is True and config["model"].startswith("SmolLM2") and config["seed"] == 0
    assert set(config["prompts"]) >= {"initial", "trust", "skeptic", "leader"}
    rows = records(folder)
    # S0 only; a reply cut at the token limit is re-asked (at most 2 re-asks), so 1-3 calls an item.
    assert len(rows) == 2 and all(1 <= r["llm_calls"] <= 3 for r in rows)
    assert json.loads((folder / "metrics.json").read_text())["n"] == 2


async def test_a_rerun_redoes_items_that_failed_for_a_transient_reason(tmp_path: Path) -> None:
    from debate.errors import ModelUnavailableError

    flaky = ScriptedChatClient([agree, ModelUnavailableError("HTTP 503 after 5 attempts"), agree, agree])
    await run(spec("single"), tmp_path, flaky)
    first = records(tmp_path)
    assert [r["transient"] for r in first] == [False, True, False, False]
    assert first[1]["pred_factual"] is None
    recovered = ScriptedChatClient([agree])  # only the failed item is asked again
    metrics = await run(spec("single"), tmp_path, recovered)
    rows = records(tmp_path)
    assert len(recovered.calls) == 1 and [r["id"] for r in rows] == [r["id"] for r in first]
    assert all(r["pred_factual"] is True and r["transient"] is False for r in rows)
    assert metrics["n"] == 4
    kept = ScriptedChatClient([])
    await run(spec("single"), tmp_path, kept)
    assert kept.calls == []


def _metrics(accuracy: float, f1: float, baselines: dict[str, float]) -> dict[str, Any]:
    return {
        "n": 10,
        "accuracy": accuracy,
        "f1": f1,
        "accuracy_ci95": [0.0, accuracy],
        "f1_ci95": [0.0, f1],
        "baselines": {name: {"accuracy": v, "f1": v} for name, v in baselines.items()},
    }


def test_ablation_figure_pads_its_axes_and_labels_coincident_baselines_together() -> None:
    from experiments.ablate_cli import ablation_figure

    same = {"length-only": 0.5, "majority-class": 0.5}
    points = [(0, _metrics(0.0, 0.0, same)), (3, _metrics(1.0, 1.0, same))]
    fig = ablation_figure("t", {"qa": points}, xlabel="minimum rounds", categorical=False, model="m")
    for ax in fig.axes:
        low, high = ax.get_ylim()
        assert low < 0.0 and high > 1.0  # a point at 0 or 1 is drawn whole
        left, right = ax.get_xlim()
        assert left < 0 and right > 3  # so are the first and last x
        legend = ax.get_legend_handles_labels()[1]
        # two baselines at one height: one line naming both, not one line hiding the other
        assert "length-only = majority-class" in legend and "length-only" not in legend
    apart = {"length-only": 0.4, "majority-class": 0.6}
    fig = ablation_figure("t", {"qa": [(0, _metrics(0.5, 0.5, apart))]}, xlabel="x", categorical=True, model="m")
    assert {"length-only", "majority-class"} <= set(fig.axes[0].get_legend_handles_labels()[1])


async def test_methods_are_a_registry_a_plugin_method_runs(tmp_path: Path) -> None:
    """A method is one registry entry (`markov_debate.methods` for plugins): its config hook and its builder."""
    from pydantic import ValidationError

    from debate.types import Usage
    from experiments.data import Item
    from experiments.methods import METHODS, MethodEntry, Prediction

    class AlwaysFactual:
        name = "always-factual"

        async def predict(self, item: Item) -> Prediction:
            return Prediction(pred_factual=True, score=1.0, decided_by="rule", usage=Usage(), report={})

        def prompt_hashes(self) -> dict[str, str]:
            return {}

    assert {"mcmad", "single", "factool", "halueval-judge", "self-check-0", "self-check-3"} <= set(METHODS)
    with pytest.raises(ValidationError, match="did you mean 'mcmad'"):
        spec("mcmda")
    METHODS.register("always-factual", MethodEntry(lambda verifier, knowledge: AlwaysFactual()))
    try:
        client = ScriptedChatClient([])  # the method makes no model call; a call would exhaust the script
        metrics = await run(spec("always-factual"), tmp_path, client)
    finally:
        METHODS._entries.pop("always-factual")
    rows = records(tmp_path)
    assert [r["pred_factual"] for r in rows] == [True] * 4 and metrics["llm_calls_per_item"] == 0.0


async def test_a_run_resumed_over_a_changed_data_file_redoes_the_changed_items(tmp_path: Path) -> None:
    """An edited record of the data file is predicted again (its old record kept in the run's history); a label
    that differs from the data's is rewritten with no call; the rest stand."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    s = spec("single").model_copy(update={"data_dir": str(data)})
    folder = tmp_path / "run"
    await run(s, folder, ScriptedChatClient([agree] * 4))
    first = records(folder)
    assert all(r["input_sha256"] for r in first)
    items = list(items_for(s))
    qa = data / "halueval" / "qa_data.jsonl"
    lines = qa.read_text().splitlines()
    edited = json.loads(lines[items[0].source_line - 1])
    edited["knowledge"] += " Edited since."
    lines[items[0].source_line - 1] = json.dumps(edited)
    qa.write_text("\n".join(lines) + "\n")
    # a record whose label no longer matches the data (as after a corrected label): rewritten, not predicted
    log = folder / "results.jsonl"
    rows = records(folder)
    rows[1]["label_factual"] = not rows[1]["label_factual"]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    client = ScriptedChatClient([agree])
    await run(s, folder, client)
    assert len(client.calls) == 1 and "Edited since." in client.calls[0].request.messages[-1].content
    after = records(folder)
    assert [r["id"] for r in after] == [r["id"] for r in first]
    assert after[1]["label_factual"] == first[1]["label_factual"]
    assert after[0]["input_sha256"] != first[0]["input_sha256"] and after[2:] == first[2:]
    history = [json.loads(line) for line in (folder / "results.history.jsonl").read_text().splitlines()]
    assert [h["record"]["id"] for h in history] == [first[0]["id"], first[1]["id"]]
