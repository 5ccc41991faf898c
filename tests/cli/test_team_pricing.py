"""Teams priced and named as they run (issue 84), through the command a user runs: each model's price in
`--estimate`, half a price refused, `config show` checking roles and saying a role's key is set, every cascade team
estimated, and `--max-cost` holding with a cascade of 200 items in flight 16 at a time, over real HTTP to two
OpenAI-compatible servers on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from debate.cli import main
from debate.config import VerifierConfig
from debate.engine import load_chain
from debate.pipeline import report_cost
from debate.pipeline._cascade_cost import CASCADE_NOTE
from debate.results import ResultRecord, read_records
from tests.support.calibration import calibration
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op

ISSUE = (
    '[model]\nbase_url = "https://api.example/v1"\nmodel = "gpt-4o"\nprice_in = 2.5\nprice_out = 10\n'
    '[roles.leader.model]\nmodel = "gpt-4o-mini"\n'
    "[roles.skeptic.model]\ntemperature = 0.7\n"
)


def _items(path: Path, n: int) -> Path:
    lines = [{"id": f"q{i}", "question": "Capital of France?", "response": "Paris."} for i in range(n)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_estimate_prices_each_model_as_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "team.toml"
    config.write_text(ISSUE)
    source = _items(tmp_path / "in.jsonl", 2)
    assert main(["verify", "--config", str(config), "--input", str(source), "--estimate", "--json"]) == 0
    models = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert models["gpt-4o-mini"]["price"] == {"input": 0.15, "output": 0.6, "source": "table"}
    assert models["gpt-4o[temperature=0.7]"]["price"] == {"input": 2.5, "output": 10.0, "source": "given"}
    assert models["gpt-4o[temperature=0.7]"]["roles"] == ["skeptic"]


def test_half_a_price_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = ["--question", "Capital of France?", "--answer", "Paris."]
    assert main(["verify", "--model.price-in", "0.15", "--estimate", *answer]) == 2
    assert "price_in is given without price_out" in capsys.readouterr().err
    assert main(["verify", "--roles", "leader.model.price_out=0.6", "--estimate", *answer]) == 2
    assert "roles.leader.model" in (err := capsys.readouterr().err) and "price_out is given without price_in" in err


def test_config_show_checks_every_role_and_says_a_roles_key_is_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--roles", "wizard.model.model=x"]) == 2
    assert "roles.wizard: the chain 'true-to-skeptic' has no role 'wizard'" in capsys.readouterr().err
    assert main(["config", "show", "--roles", "leader.model.api_key=sk-leader-9876"]) == 0
    out = capsys.readouterr().out
    assert "roles.leader.model.api_key" in out and "(set, not shown)" in out and "sk-leader-9876" not in out


def _cascade(tmp_path: Path, weak: str, strong: str) -> Path:
    first, later = tmp_path / "weak.json", tmp_path / "strong.json"
    first.write_text(calibration(model="weak-1").model_dump_json())
    later.write_text(calibration(model="strong-1").model_dump_json())
    config = tmp_path / "cascade.toml"
    config.write_text(
        f'[model]\nbase_url = "{weak}"\nmodel = "weak-1"\nprice_in = 1.0\nprice_out = 2.0\nmax_concurrency = 16\n'
        "max_tokens = 64\n"
        f'[debate]\nstop = "cascade:0.9"\ncalibration = "{first}"\nmin_rounds = 0\nmax_rounds = 1\n'
        "max_parse_retries = 0\n"
        f'[[debate.cascade]]\nname = "strong"\ncalibration = "{later}"\nmax_rounds = 2\n'
        f'[debate.cascade.model]\nbase_url = "{strong}"\nmodel = "strong-1"\nprice_in = 10.0\nprice_out = 20.0\n'
    )
    return config


def test_every_cascade_team_is_estimated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _cascade(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1")
    source = _items(tmp_path / "in.jsonl", 10)
    assert main(["verify", "--config", str(config), "--input", str(source), "--estimate", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    models = {m["name"]: m for m in figures["models"]}
    later = models["strong: strong-1"]
    assert later["price"]["source"] == "given" and later["price"]["input"] == 10.0
    assert set(later["roles"]) == set(load_chain("true-to-skeptic").spec.all_roles())
    # Its calls are in the run's, and its cost in the sum; a claim may reach it, so the high end holds its rounds.
    assert sum(m["calls"]["expected"] for m in models.values()) == pytest.approx(figures["calls"]["expected"])
    assert 0 < later["calls"]["expected"] < later["calls"]["high"]
    assert figures["cost_usd"]["expected"] == pytest.approx(sum(m["cost_usd"]["expected"] for m in models.values()))
    assert CASCADE_NOTE in figures["notes"] and figures["item_cost_most"] > 0


def _tokens(call: Call) -> tuple[int, int]:
    """What an endpoint bills: the prompt at about 4 characters a token, and a reply near max_tokens (64), so an
    item costs near the most the estimate allows it."""
    sent = sum(len(str(m.get("content") or "")) for m in call.body["messages"])
    return sent // 4 + 1, 60


def test_max_cost_with_a_cascade_of_200_items_16_in_flight_never_ends_above_its_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counters = {"weak": itertools.count(), "strong": itertools.count()}
    lock = threading.Lock()

    def split(team: str) -> Callable[[Call], Reply]:
        # Each team disagrees with itself: every claim reaches the strong team and runs to its rounds' limit, so
        # each item costs near the most the estimate reserves for it.
        def reply(call: Call) -> Reply:
            with lock:
                verdict = next(counters[team]) % 2 == 0
            return Reply(content=op(verdict), usage=_tokens(call))

        return reply

    source, out = _items(tmp_path / "in.jsonl", 200), tmp_path / "out.jsonl"
    with (
        FakeOpenAI(routes={"debate": split("weak")}, models=("weak-1",)) as weak,
        FakeOpenAI(routes={"debate": split("strong")}, models=("strong-1",)) as strong,
    ):
        config = _cascade(tmp_path, weak.base_url, strong.base_url)
        base = ["verify", "--config", str(config), "--input", str(source)]
        assert main([*base, "--estimate", "--json"]) == 0
        most = json.loads(capsys.readouterr().out)["item_cost_most"]
        limit = 20 * most
        code = main([*base, "--output", str(out), "--items", "16", "--max-cost", f"{limit:.10f}"])
        err = capsys.readouterr().err
        assert strong.calls, "no claim reached the strong team: the cascade was not exercised"
    assert code == 4, err
    resolved = VerifierConfig.model_validate(json.loads(json.dumps(_config_of(out))))
    reports = [r.result for r in read_records(out) if isinstance(r, ResultRecord)]
    spent = sum(report_cost(r, resolved) or 0.0 for r in reports)
    # The first 16 items start together (the limit holds 20 of the most an item may cost); the run stops before
    # the items in flight could take it past the limit, and what it spent stays within it.
    assert 16 <= len(reports) < 200 and spent <= limit, (len(reports), spent, limit)
    assert "--max-cost" in err and "reserved" in err


def _config_of(log: Path) -> dict[str, object]:
    first = next(r for r in read_records(log) if isinstance(r, ResultRecord))
    return first.result.meta.config
