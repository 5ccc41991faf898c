"""The `debate` command as a user runs it: subprocesses against scripted servers on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import cli_env as _env
from tests.support.helpers import debate, op

pytestmark = pytest.mark.slow  # starts processes


def _agreeing(call: Call) -> Reply:
    """The debate route: an agent agrees with a claim that names Paris."""
    return Reply(content=op("Paris" in call.asked, 0, "checked"))


AGREEING: dict[str, Route] = {"debate": _agreeing}


def test_json_report_structure(tmp_path: Path) -> None:
    evidence = tmp_path / "knowledge.txt"
    evidence.write_text("Paris is the capital and largest city of France.")
    with FakeOpenAI(routes=AGREEING) as server:
        done = debate(
            "verify",
            "--question",
            "What is the capital of France?",
            "--answer",
            "Paris",
            "--evidence",
            f"@{evidence}",
            "--model.base-url",
            server.base_url,
            "--json",
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["factual"] is True and report["verdict"] == "factual"
    claim = report["claims"][0]
    assert {"text", "factual", "error_severity", "status", "evidence", "debate"} <= set(claim)
    assert claim["evidence"][0] == {
        "text": evidence.read_text(),
        "source": str(evidence),
        "kind": "given",
        "score": None,
        "query": None,
    }
    d = claim["debate"]
    assert d["rounds"] == 2 and d["consensus"] is True
    assert [s["name"] for s in d["states"]] == ["S0", "S2", "S2"]
    assert [t["role"] for t in d["states"][1]["turns"]] == ["skeptic", "trust", "leader"]
    assert set(d["states"][1]["turns"][0]) >= {"role", "factuality", "error_severity", "opinion"}
    assert report["usage"] == {"llm_calls": 7, "prompt_tokens": 77, "completion_tokens": 49}
    meta = report["meta"]
    assert meta["model"] == "fake-model" and meta["config"]["debate"]["min_rounds"] == 2 and len(meta["prompts"]) == 5
    assert "fake-model" in done.stderr


def test_readable_report(tmp_path: Path) -> None:
    """Summary first, then the evidence the agents saw (numbered, with its source), the chain with why it moved,
    the opinions; --brief stops after the summary; --show-prompts prints each turn's exact messages."""
    (tmp_path / "knowledge.txt").write_text("The capital city lies on the Seine.")
    common = [
        "verify",
        "--question",
        "Capital of France?",
        "--response",
        "Lyon",
        "--evidence",
        f"@{tmp_path / 'knowledge.txt'}",
        "--debate.min-rounds",
        "1",
        "--debate.max-rounds",
        "1",
        "--debate.chain",
        "always-trust",
    ]
    with FakeOpenAI(routes=AGREEING) as server:
        done = debate(*common, "--model.base-url", server.base_url)
        brief = debate(*common, "--model.base-url", server.base_url, "--brief")
        prompts = debate(*common, "--model.base-url", server.base_url, "--show-prompts")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "NON_FACTUAL" in out and "non_factual" in out
    assert out.index("claims") < out.index("evidence (1):") < out.index("chain:")
    assert f"[1] The capital city lies on the Seine. [given: {tmp_path / 'knowledge.txt'}]" in out
    assert "chain: S0 (initial said false -> S1)  S1" in out
    assert "[0:4] 'Lyon'" in out  # where the claim sits in the response
    assert brief.returncode == 0 and "NON_FACTUAL" in brief.stdout and "[0:4]" in brief.stdout
    assert "evidence (1)" not in brief.stdout and "chain:" not in brief.stdout
    assert "--- system ---" not in out
    assert prompts.stdout.count("--- system ---") == 4  # S0 + the three agents of S1
    assert "--- assistant ---" in prompts.stdout and "The capital city lies on the Seine." in prompts.stdout


def _verify_in(
    tmp_path: Path, server: FakeOpenAI, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", "verify", *args, "--model.base-url", server.base_url, "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=60,
        input=stdin,
    )


def test_a_value_that_names_a_file_is_text_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "knowledge.txt").write_text("Paris is the capital of France.")
    with FakeOpenAI(routes=AGREEING) as server:
        done = _verify_in(tmp_path, server, "--answer", "Paris", "--evidence", "knowledge.txt")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["claims"][0]["evidence"][0]["text"] == "knowledge.txt"
    assert "--evidence is read as text; to read the file knowledge.txt instead, pass --evidence @knowledge.txt" in (
        done.stderr
    )


def test_a_pasted_paragraph_stdin_and_a_literal_at_sign(tmp_path: Path) -> None:
    """Issue 43: a 300-character value without a line break was probed as a file name and crashed."""
    paragraph = "Paris is the capital of France and its largest city, " * 6
    with FakeOpenAI(routes=AGREEING) as server:
        pasted = _verify_in(tmp_path, server, "--answer", "Paris", "--evidence", paragraph)
        piped = _verify_in(tmp_path, server, "--answer", "-", "--evidence", "@@home", stdin="Paris\n")
    assert pasted.returncode == 0, pasted.stderr
    assert json.loads(pasted.stdout)["claims"][0]["evidence"][0]["text"] == paragraph.strip()
    assert piped.returncode == 0, piped.stderr
    report = json.loads(piped.stdout)
    assert report["response"] == "Paris\n" and report["claims"][0]["evidence"][0]["text"] == "@home"


def test_rejected_key_exits_1() -> None:
    with FakeOpenAI([Reply(status=401, error_message="invalid api key")]) as server:
        done = debate(
            "verify",
            "--answer",
            "x",
            "--model.base-url",
            server.base_url,
            "--model.model",
            "m",
            "--model.api-key",
            "bad",
        )
    assert done.returncode == 1
    assert "HTTP 401" in done.stderr and "Traceback" not in done.stderr


def _batch_input(path: Path, n: int, *, bad_lines: bool = False) -> list[str]:
    lines, ids = [], []
    for i in range(n):
        ids.append(f"q{i}")
        answer = "Paris" if i % 2 == 0 else "Lyon"
        lines.append(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": "Capital of France?",
                    "response": answer,
                    "reference": "The capital lies on the Seine.",
                    "extra": i,
                }
            )
        )
    if bad_lines:
        lines.insert(1, "{not json")
        lines.insert(3, json.dumps({"id": "nr", "question": "q"}))
        lines.insert(5, json.dumps({"id": "q0", "response": "dup"}))
    path.write_text("\n".join(lines) + "\n")
    return ids


def test_batch_records_bad_lines_and_goes_on(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = _batch_input(source, 4, bad_lines=True)
    with FakeOpenAI(routes=AGREEING) as server:
        done = debate(
            "verify",
            "--input",
            str(source),
            "--output",
            str(out),
            "--model.base-url",
            server.base_url,
            "--model.max-concurrency",
            "2",
            "--debate.min-rounds",
            "0",
        )
    # the bad lines are recorded and the batch goes on, and the lines not checked fail it (exit 5), said first
    assert done.returncode == 5, done.stderr
    assert "3 of 7 input line(s) not checked (3 input or model error(s); first: line 2: not valid JSON" in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3, 4, 5, 6, 7]  # input order
    errors = {r["line"]: r["error"]["message"] for r in records if "error" in r}
    assert errors[2].startswith("line 2: not valid JSON")
    assert errors[4] == "line 4: field 'response': Field required"
    assert errors[6] == "line 6: duplicate id 'q0' (first on line 1)"
    results = {r["id"]: r for r in records if "result" in r}
    assert sorted(results) == ids
    assert results["q0"]["result"]["factual"] is True and results["q1"]["result"]["factual"] is False
    assert results["q2"]["extra"] == 2
    assert "3 errors" in done.stderr


def test_batch_resumes_after_kill_9_without_loss_or_repeat(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = _batch_input(source, 12)

    def slow(call: Call) -> Reply:
        reply = _agreeing(call)
        reply.delay_s = 0.15
        return reply

    args = [
        "verify",
        "--input",
        str(source),
        "--output",
        str(out),
        "--model.max-concurrency",
        "3",
        "--debate.min-rounds",
        "0",
    ]
    with FakeOpenAI(routes={"debate": slow}) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "debate.cli", *args, "--model.base-url", server.base_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 3):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Simulate the worst case of a kill: a record torn in the middle of its line.
        with out.open("a") as fh:
            fh.write('{"id": "q11", "line": 12, "result": {"verdict": "fa')
        first_pass = [json.loads(line)["id"] for line in out.read_text().splitlines()[:-1]]
        assert 3 <= len(first_pass) < 12
        calls_before = len(server.requests)
        done = debate(*args, "--model.base-url", server.base_url)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) - calls_before == 12 - len(first_pass)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ids
    assert all("result" in r for r in records)
    # nothing left to run: no model is asked (the endpoint is not even there); naming another model would be
    # refused as other settings (tests/cli/test_silent_answers.py)
    again = debate(*args, "--model.base-url", "http://127.0.0.1:9/v1")
    assert again.returncode == 0 and "12 already done" in again.stderr
    assert out.read_text().count("\n") == 12


def test_rag_with_rules_prefilter(tmp_path: Path) -> None:
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps([{"id": "doc1#0", "parent_id": "doc1", "text": "Paris is the capital of France."}]))
    with FakeOpenAI(routes=AGREEING) as server:
        done = debate(
            "verify",
            "--task",
            "rag",
            "--sources",
            str(sources),
            "--prefilter.prefilters",
            "rules",
            "--json",
            "--answer",
            "Paris is the capital of France [doc1]. Paris has ten million cats [doc7].",
            "--debate.min-rounds",
            "0",
            "--model.base-url",
            server.base_url,
        )
        assert done.returncode == 0, done.stderr
        # Seed 000: the invalid citation raises the answer's risk; both claims are debated.
        assert len(server.requests) == 2
    report = json.loads(done.stdout)
    assert [c["decided_by"] for c in report["claims"]] == ["debate", "debate"]
    assert "doc7" in report["claims"][1]["prefilters"][0]["reason"]
    citation = report["prefilter"]["checks"][0]["citation"]
    assert citation["invalid_citations"] == ["doc7"] and citation["valid_citations"] == ["doc1"]
    assert report["prefilter"]["risk_level"] == "high"
    missing = debate("verify", "--task", "rag", "--answer", "x", "--model.base-url", "http://127.0.0.1:9/v1")
    assert missing.returncode == 2 and "--sources" in missing.stderr


def test_two_step_judge_converts_on_the_judge_model(tmp_path: Path) -> None:
    """--prefilter.options rag-judge.two_step=true, rag-judge.convert_model=NAME: seed 000's second step runs on the
    named (smaller) model, same endpoint."""
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps({"doc1": "Paris is the capital of France."}))

    judgment = {
        "score": 0.5,
        "reasoning": "r",
        "confidence": 0.7,
        "decision": "refine_search",
        "hallucination_risk": 0.5,
        "hallucination_notes": "None",
    }
    routes: dict[str, Route] = {
        "rag-judge:freeform": [Reply(content="The second sentence has no source; risk about 0.5.")],
        "rag-judge:convert": [Reply(content=json.dumps(judgment))],
        **AGREEING,
    }

    answer = "Paris is the capital of France [doc1]. The city also hosts a great many museums and galleries of art."
    with FakeOpenAI(routes=routes) as server:
        done = debate(
            "verify",
            "--task",
            "rag",
            "--sources",
            str(sources),
            "--prefilter.prefilters",
            "rag-judge",
            "--json",
            "--answer",
            answer,
            "--debate.min-rounds",
            "0",
            "--prefilter.options",
            "rag-judge.two_step=true",
            "--prefilter.options",
            "rag-judge.convert_model=small-model",
            "--model.base-url",
            server.base_url,
            "--model.model",
            "fake-model",
        )
        assert done.returncode == 0, done.stderr
        models = [(c.purpose, c.body["model"]) for c in server.calls if c.purpose.startswith("rag-judge")]
    assert models == [("rag-judge:freeform", "fake-model"), ("rag-judge:convert", "small-model")]
    judge = json.loads(done.stdout)["prefilter"]["checks"][0]["judge"]
    assert judge["convert_model"] == "small-model" and judge["combined_risk"] == "moderate"
    assert judge["action"] == "refine_search"


def _checker_chain(tmp_path: Path) -> Path:
    (tmp_path / "checker.toml").write_text(
        'description = "a fourth role: checks dates and numbers"\nvariables = ["claim", "evidence", "previous"]\n'
        "system = 'You are the Checker agent. You check every date and number.'\n"
        "user = '''Evidence:\n$evidence\n\nClaim:\n$claim\n\nThe previous agent said:\n$previous'''\n"
    )
    spec = tmp_path / "checker-chain.toml"
    spec.write_text(
        'name = "trust-checker-skeptic-leader"\ndescription = "the paper\'s S1 with a date checker"\n'
        '[states]\nS0 = ["initial"]\nS1 = ["trust", "checker", "skeptic", "leader"]\n'
        '[transitions."*"]\ntrue = "S1"\nfalse = "S1"\n'
        '[roles.checker]\nprompt = "checker.toml"\nsees = "previous"\ntitle = "Checker"\n'
    )
    return spec


def test_chains_command_lists_and_exports_graphs(tmp_path: Path) -> None:
    listed = debate("chains")
    assert listed.returncode == 0, listed.stderr
    for name in ("true-to-skeptic", "true-to-trust", "always-skeptic", "always-trust"):
        assert name in listed.stdout
    assert "S2 = skeptic -> trust -> leader" in listed.stdout and "S0 --true--> S2" in listed.stdout
    shown = debate("chains", str(_checker_chain(tmp_path)), "--json")
    assert shown.returncode == 0, shown.stderr
    graph = json.loads(shown.stdout)
    assert graph["nodes"][1] == {"id": "S1", "roles": ["trust", "checker", "skeptic", "leader"], "initial": False}
    assert {"source": "S1", "target": "S1", "verdict": False} in graph["edges"]
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\n[states]\nS0 = ["initial"]\nS1 = ["trust", "oracle"]\n[transitions."*"]\n'
        'true = "S1"\nfalse = "S1"\n'
    )
    refused = debate("chains", str(bad))
    assert refused.returncode == 2 and "unknown role 'oracle'" in refused.stderr


def test_verify_with_a_chain_file_runs_its_fourth_role(tmp_path: Path) -> None:
    spec = _checker_chain(tmp_path)
    with FakeOpenAI(routes=AGREEING) as server:
        done = debate(
            "verify",
            "--question",
            "Capital of France?",
            "--answer",
            "Paris",
            "--evidence",
            "Paris is the capital.",
            "--model.base-url",
            server.base_url,
            "--debate.chain",
            str(spec),
            "--debate.min-rounds",
            "1",
            "--debate.max-rounds",
            "1",
            "--json",
        )
        systems = [r["messages"][0]["content"] for r in server.requests]
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    state = report["claims"][0]["debate"]["states"][1]
    assert [t["role"] for t in state["turns"]] == ["trust", "checker", "skeptic", "leader"]
    assert systems[2].startswith("You are the Checker agent.")
    assert "checker" in report["meta"]["prompts"] and report["meta"]["config"]["debate"]["chain"] == str(spec)
    # The Leader is shown every opinion of its round, the Checker's included.
    leader_user = server.requests[4]["messages"][-1]["content"]
    assert "Here is the Checker agent's response:" in leader_user
