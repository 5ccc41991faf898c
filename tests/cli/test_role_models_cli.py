"""A model per role through the command a user runs, over real HTTP to two OpenAI-compatible servers on 127.0.0.1:
the config file's `[roles.leader.model]`, the flag's spelling, the usage and cost per model, `--estimate` and
`--max-cost` per model, a resumed batch, and a role whose endpoint does not answer."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from debate.cli import main
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op

PRICES = "price_in = 1.0\nprice_out = 2.0\n"
"""The weak model: $1 in, $2 out per million tokens; the strong one ten times that."""


def _items(path: Path, n: int) -> Path:
    lines = [{"id": f"q{i}", "question": "Capital of France?", "response": "Paris."} for i in range(n)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _team(path: Path, weak: str, strong: str) -> Path:
    path.write_text(
        f'[model]\nbase_url = "{weak}"\n{PRICES}\n'
        f'[roles.leader.model]\nbase_url = "{strong}"\nprice_in = 10.0\nprice_out = 20.0\n'
        "[debate]\nmin_rounds = 1\nmax_rounds = 1\n"
    )
    return path


def _agrees(call: Call) -> Reply:
    return Reply(content=op(True), usage=(100, 10))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_leader_runs_on_its_own_endpoint_and_each_model_is_priced_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _items(tmp_path / "in.jsonl", 3), tmp_path / "out.jsonl"
    with (
        FakeOpenAI(routes={"debate": _agrees}, models=("weak-1",)) as weak,
        FakeOpenAI(routes={"debate:leader": _agrees}, models=("strong-1",)) as strong,
    ):
        config = _team(tmp_path / "team.toml", weak.base_url, strong.base_url)
        assert main(["verify", "--config", str(config), "--input", str(source), "--output", str(out)]) == 0
        err = capsys.readouterr().err
        # Only the leader's turns reached the strong endpoint, one per debated claim.
        assert strong.purposes == ["debate:leader"] * 3
        assert "debate:leader" not in weak.purposes
        records = [json.loads(line) for line in out.read_text().splitlines()]
        report = records[0]["result"]
        assert report["meta"]["model"] == "weak-1" and report["meta"]["roles"] == {"leader": "strong-1"}
        turns = [t for s in report["claims"][0]["debate"]["states"] for t in s["turns"]]
        assert {t["role"]: t["call"]["model"] for t in turns} == {
            "initial": "weak-1",
            "skeptic": "weak-1",
            "trust": "weak-1",
            "leader": "strong-1",
        }
        # 9 weak calls and 3 strong ones, each 100 in / 10 out: $0.0009 + $0.00018 and $0.003 + $0.0006.
        usage = next(line for line in err.splitlines() if line.startswith("usage:"))
        assert "12 model calls" in usage and "$0.0047" in usage, usage
        assert "weak-1: 9 calls, $0.0011" in usage and "strong-1: 3 calls, $0.0036" in usage, usage
        # Two providers, two invoices: each endpoint's part, as its own invoice reads.
        hosts = [url.removeprefix("http://").removesuffix("/v1") for url in (weak.base_url, strong.base_url)]
        assert f"by endpoint: {hosts[0]} 9 calls, $0.0011; {hosts[1]} 3 calls, $0.0036" in usage, usage

        # The same command again: already done, nothing asked of either model.
        asked = (len(weak.calls), len(strong.calls))
        assert main(["verify", "--config", str(config), "--input", str(source), "--output", str(out)]) == 0
        assert "0 written" in capsys.readouterr().err and (len(weak.calls), len(strong.calls)) == asked
        # Another leader model is another setting: refused, naming it.
        other = ["--roles", "leader.model.model=strong-2"]
        assert main(["verify", "--config", str(config), "--input", str(source), "--output", str(out), *other]) == 2
        err = capsys.readouterr().err
        assert "made with other settings (config.roles" in err and '"strong-2"' in err, err


def test_the_estimate_and_max_cost_price_each_role_at_its_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _items(tmp_path / "in.jsonl", 4)
    config = tmp_path / "team.toml"
    config.write_text(
        f'[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "weak-1"\n{PRICES}\n'
        '[roles.leader.model]\nmodel = "strong-1"\nprice_in = 10.0\nprice_out = 20.0\n'
    )
    assert main(["verify", "--config", str(config), "--input", str(source), "--estimate", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    models = {m["name"]: m for m in figures["models"]}
    assert set(models) == {"weak-1", "strong-1"} and models["strong-1"]["roles"] == ["leader"]
    # The paper's chain: each round has one leader turn in three, S0 none; the sum is the whole run.
    total = figures["calls"]["expected"]
    assert sum(m["calls"]["expected"] for m in models.values()) == pytest.approx(total)
    turns, claims = figures["turns_per_claim"]["expected"], figures["claims"]
    calls_per_turn = figures["calls_per_claim"]["expected"] / turns
    assert models["strong-1"]["calls"]["expected"] == pytest.approx((turns - 1) / 3 * claims * calls_per_turn)
    assert figures["cost_usd"]["expected"] == pytest.approx(sum(m["cost_usd"]["expected"] for m in models.values()))
    assert models["strong-1"]["cost_usd"]["expected"] > models["weak-1"]["cost_usd"]["expected"] / 3

    # A role without a price: the estimate says which, and --max-cost refuses before any call.
    config.write_text(
        f'[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "weak-1"\n{PRICES}\n'
        '[roles.leader.model]\nbase_url = "http://127.0.0.1:8/v1"\nmodel = "unknown-strong"\n'
    )
    assert main(["verify", "--config", str(config), "--input", str(source), "--estimate"]) == 0
    said = capsys.readouterr().out
    assert "no price known for model unknown-strong (leader)" in said
    assert "model unknown-strong (leader):" in said and "no price known" in said


def test_a_role_whose_endpoint_does_not_answer_fails_only_its_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _items(tmp_path / "in.jsonl", 2), tmp_path / "out.jsonl"
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with FakeOpenAI(routes={"debate": _agrees}, models=("weak-1",)) as weak:
        config = tmp_path / "team.toml"
        config.write_text(
            f'[model]\nbase_url = "{weak.base_url}"\n'
            f'[roles.leader.model]\nbase_url = "{dead}"\nmodel = "strong-1"\nretry_refused = false\n'
        )
        # S0 alone decides (no round runs): the leader is never asked, so the dead endpoint costs nothing.
        s0 = ["--debate.min-rounds", "0", "--debate.max-rounds", "0"]
        done = main(["verify", "--config", str(config), "--input", str(source), "--output", str(out), *s0])
        assert done == 0
        assert all(json.loads(line)["result"]["verdict"] == "factual" for line in out.read_text().splitlines())
        capsys.readouterr()
        # With rounds, every debate needs the leader: the claims are unverifiable, named by the leader's endpoint;
        # the weak model's turns ran and the batch went on to its end.
        again = tmp_path / "again.jsonl"
        main(["verify", "--config", str(config), "--input", str(source), "--output", str(again)])
        err = capsys.readouterr().err
        records = [json.loads(line) for line in again.read_text().splitlines()]
        assert len(records) == 2
        for record in records:
            claim = record["result"]["claims"][0]
            assert claim["status"] == "unverifiable", claim
            turns = {t["role"]: t for s in claim["debate"]["states"] for t in s["turns"]}
            assert turns["initial"]["call"]["model"] == "weak-1" and turns["initial"]["factuality"] is True
            assert turns["leader"]["failure"] is not None
        assert "weak-1" in err


def test_a_fit_of_a_mixed_team_records_each_roles_model_and_refuses_another_team(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {
            "id": f"q{i}",
            "question": "Capital of France?",
            "response": "Paris." if i % 2 else "Lyon.",
            "label_factual": i % 2 == 1,
        }
        for i in range(60)
    ]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))

    def weak_says(call: Call) -> Reply:
        # Right on most items, wrong on every fifth: a debate with something to fit.
        item = int((call.item or "q0").lstrip("q"))
        truth = item % 2 == 1
        return Reply(content=op(truth if item % 5 else not truth))

    def strong_says(call: Call) -> Reply:
        return Reply(content=op(int((call.item or "q0").lstrip("q")) % 2 == 1))

    with (
        FakeOpenAI(routes={"debate": weak_says}, models=("weak-1",)) as weak,
        FakeOpenAI(routes={"debate:leader": strong_says}, models=("strong-1",)) as strong,
    ):
        config = _team(tmp_path / "team.toml", weak.base_url, strong.base_url)
        assert main(["verify", "--config", str(config), "--input", str(source), "--output", str(out)]) == 0
        saved = tmp_path / "cal.json"
        assert main(["dynamics", "fit", str(out), "--save", str(saved)]) == 0
        fitted = json.loads(saved.read_text())["fitted_on"]
        assert (fitted["model"], fitted["roles"]) == ("weak-1", {"leader": "strong-1"})
        capsys.readouterr()
        one = tmp_path / "one.jsonl"
        one.write_text(json.dumps(lines[1]) + "\n")
        calibrated = ["--debate.calibration", str(saved)]
        # The same team: scored.
        done = main(
            ["verify", "--config", str(config), "--input", str(one), "--output", str(tmp_path / "a.jsonl"), *calibrated]
        )
        assert done == 0, capsys.readouterr().err
        scored = json.loads((tmp_path / "a.jsonl").read_text())["result"]
        assert scored["claims"][0]["p_factual"] is not None
        # Every role on the weak model: refused before any claim, naming the leader.
        alone = tmp_path / "alone.toml"
        alone.write_text(f'[model]\nbase_url = "{weak.base_url}"\n[debate]\nmin_rounds = 1\nmax_rounds = 1\n')
        refused = main(
            ["verify", "--config", str(alone), "--input", str(one), "--output", str(tmp_path / "b.jsonl"), *calibrated]
        )
        assert refused != 0
        assert (
            "fitted with the leader on model 'strong-1'; this run's leader runs on 'weak-1'" in capsys.readouterr().err
        )


def test_the_cascade_hands_undecided_claims_to_the_strong_endpoint_and_says_what_each_team_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.calibration import calibration

    source, out = _items(tmp_path / "in.jsonl", 4), tmp_path / "out.jsonl"
    (tmp_path / "weak.json").write_text(calibration(model="weak-1").model_dump_json())
    (tmp_path / "strong.json").write_text(calibration(model="strong-1").model_dump_json())

    def split(call: Call) -> Reply:
        # q0 and q1: every weak agent says true (decided at once); q2 and q3: the weak team splits.
        agrees = call.item in ("q0", "q1") or call.purpose in ("debate:initial", "debate:trust")
        return Reply(content=op(agrees), usage=(100, 10))

    with (
        FakeOpenAI(routes={"debate": split}, models=("weak-1",)) as weak,
        FakeOpenAI(routes={"debate": _agrees}, models=("strong-1",)) as strong,
    ):
        config = tmp_path / "cascade.toml"
        config.write_text(
            f'[model]\nbase_url = "{weak.base_url}"\n{PRICES}\n'
            '[debate]\nmin_rounds = 1\nmax_rounds = 1\nstop = "cascade:0.9"\n'
            f'calibration = "{tmp_path / "weak.json"}"\n\n'
            f'[[debate.cascade]]\nname = "strong"\ncalibration = "{tmp_path / "strong.json"}"\nmax_rounds = 2\n'
            f'[debate.cascade.model]\nbase_url = "{strong.base_url}"\nprice_in = 10.0\nprice_out = 20.0\n'
        )
        assert main(["verify", "--config", str(config), "--input", str(source), "--output", str(out)]) == 0
    err = capsys.readouterr().err
    records = {r["id"]: r["result"] for r in map(json.loads, out.read_text().splitlines())}
    teams = {i: [t["name"] for t in r["claims"][0]["debate"]["teams"]] for i, r in records.items()}
    assert teams == {"q0": ["first"], "q1": ["first"], "q2": ["first", "strong"], "q3": ["first", "strong"]}
    assert {c.item for c in strong.calls} == {"q2", "q3"}
    cascade = next(line for line in err.splitlines() if line.startswith("cascade:"))
    assert "claims decided 2 by first, 2 by strong, 0 undecided" in cascade, cascade
    strong_calls = len(strong.calls)
    assert f"strong {strong_calls} calls, ${strong_calls * (100 * 10 + 10 * 20) / 1e6:.4f}" in cascade, cascade
    # Its log mixes two teams' models under the same roles: a fit of it is refused, not silently pooled.
    assert main(["dynamics", "fit", str(out), "--save", str(tmp_path / "mixed.json")]) == 2
    assert "a debate the cascade or voi stop gave to another team's models" in capsys.readouterr().err


def test_the_estimate_of_a_cascade_refuses_a_later_team_it_cannot_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.calibration import calibration

    (tmp_path / "weak.json").write_text(calibration(model="weak-1").model_dump_json())
    config = tmp_path / "cascade.toml"
    config.write_text(
        f'[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "weak-1"\n{PRICES}\n'
        f'[debate]\nstop = "cascade:0.9"\ncalibration = "{tmp_path / "weak.json"}"\n\n'
        '[[debate.cascade]]\nname = "strong"\ncalibration = "strong.json"\n[debate.cascade.model]\nmodel = "strong-1"\n'
    )
    source = _items(tmp_path / "in.jsonl", 2)
    # Its share of the claims and its turns come from its calibration: without the file, no estimate of it.
    assert main(["verify", "--config", str(config), "--input", str(source), "--estimate"]) == 2
    assert "strong.json" in capsys.readouterr().err
