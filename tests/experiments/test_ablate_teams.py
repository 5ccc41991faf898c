"""`debate ablate teams`: team compositions as an ablation axis, through the command, over real HTTP to two
OpenAI-compatible servers on 127.0.0.1, each team's cost at its models' prices, the Pareto front and the plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from debate.cli import main
from experiments.ablate_teams import pareto_front
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import FIXTURES, op

DATA = FIXTURES / "data"


def test_the_pareto_front_keeps_what_no_team_beats_on_both() -> None:
    points = [(1.0, 0.80), (10.0, 0.90), (2.0, 0.79), (5.0, 0.85), (10.0, 0.85), (3.0, 0.80)]
    assert pareto_front(points) == [0, 3, 1]


def test_a_team_name_with_a_bar_stays_one_cell_of_its_row(tmp_path: Path) -> None:
    rows = [
        {"team": name, "n": 3, "accuracy": 0.5, "accuracy_ci95": None, "calls": (7.0, 7.0, 7.0), "cost": None}
        for name in ("a | b", "plain", "back\\slash |")
    ]
    replot = tmp_path / "ablation"
    replot.mkdir()
    (replot / "teams.json").write_text(json.dumps(rows))
    assert main(["ablate", "replot", str(replot)]) == 0
    lines = (replot / "table.md").read_text().splitlines()
    header, body = lines[2], lines[4:]
    # An unescaped bar ends a cell: each row has the header's columns, the name in the first.
    columns = len(header.split("|"))
    assert [len(re.split(r"(?<!\\)\|", row)) for row in body] == [columns] * 3, body
    assert body[0].startswith("| a \\| b | 3 |") and body[2].startswith("| back\\\\slash \\| | 3 |")


def test_team_compositions_are_run_priced_and_plotted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def agrees(call: Call) -> Reply:
        return Reply(content=op(True), usage=(100, 10))

    with (
        FakeOpenAI(routes={"*": agrees}, models=("weak-1",)) as weak,
        FakeOpenAI(routes={"*": agrees}, models=("strong-1",)) as strong,
    ):
        teams = tmp_path / "teams.toml"
        strong_model = f'base_url = "{strong.base_url}"\nmodel = "strong-1"\nprice_in = 10.0\nprice_out = 20.0\n'
        teams.write_text(
            '[[team]]\nname = "all weak"\n\n'
            f'[[team]]\nname = "strong leader"\n[team.roles.leader.model]\n{strong_model}\n'
            f'[[team]]\nname = "all strong"\n[team.model]\n{strong_model}'
        )
        common = ["--data-dir", str(DATA), "--runs-root", str(tmp_path), "--n", "3", "--debate.max-rounds", "2"]
        model = ["--model.base-url", weak.base_url, "--model.price-in", "1", "--model.price-out", "2"]
        assert main(["ablate", "teams", "--teams", str(teams), *common, *model]) == 0
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "ablate-teams" / "teams.json").read_text())
    assert [r["team"] for r in rows] == ["all weak", "strong leader", "all strong"]
    # Every call is 100 in and 10 out: an item's cost is its calls at each model's price.
    weak_call, strong_call = (100 * 1 + 10 * 2) / 1e6, (100 * 10 + 10 * 20) / 1e6
    assert rows[0]["cost"][0] == pytest.approx(rows[0]["calls"][0] * weak_call)
    assert rows[2]["cost"][0] == pytest.approx(rows[2]["calls"][0] * strong_call)
    assert rows[0]["cost"][0] < rows[1]["cost"][0] < rows[2]["cost"][0]
    # The leader's turns alone went to the strong endpoint in the middle team.
    assert {c.purpose for c in strong.calls} >= {"debate:leader"}
    assert "| all weak | 3 |" in out and "on the Pareto front" in out
    assert (tmp_path / "ablate-teams" / "teams.png").read_bytes().startswith(b"\x89PNG")
    # Redrawn from the folder alone: the same table, no model asked.
    table = (tmp_path / "ablate-teams" / "table.md").read_text()
    (tmp_path / "ablate-teams" / "teams.png").unlink()
    assert main(["ablate", "replot", str(tmp_path / "ablate-teams")]) == 0
    assert (tmp_path / "ablate-teams" / "table.md").read_text() == table
    assert (tmp_path / "ablate-teams" / "teams.png").is_file()
