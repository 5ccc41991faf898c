"""The guard's action over the whole table: every risk (none, low, moderate, high, and a verification that could
not run) x policy x `--act-at` x stream mode x `--on-failure`, 180 cells, each compared with the rule as
docs/guard.md writes it (the table is read from the page, so the page and the guard cannot drift apart). The
reports are the real engine's, on scripted replies, changed only where a risk needs a label the scripted judge does
not give."""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest

from debate.types import Failure, Report
from markov_debate.guard.decide import act, failed, verification
from markov_debate.guard.settings import RouteSettings
from tests.guard.conftest import GOOD
from tests.guard.test_decide import _report
from tests.support.helpers import ROOT

RISKS = ("none", "low", "moderate", "high", "could not run")
POLICIES = ("annotate", "flag", "block")
ACT_AT = ("moderate", "high")
STREAMS = (None, "hold", "pass")
ON_FAILURE = ("open", "closed")
_ORDER = ("none", "low", "moderate", "high")


def documented() -> dict[str, dict[str, str]]:
    """docs/guard.md's table: row (its first cell) -> policy -> the cell's text."""
    page = (ROOT / "docs" / "guard.md").read_text()
    table = page.split("| the verification | `annotate` | `flag` | `block` |", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[1:]]
    assert len(rows) == 4, rows
    return {row[0]: dict(zip(POLICIES, row[1:], strict=True)) for row in rows}


def expected(table: dict[str, dict[str, str]], risk: str, policy: str, act_at: str, stream: str | None, on: str) -> str:
    """The action the documented table gives for one cell."""
    if risk == "could not run":
        cell = table[f"could not run, `--on-failure {on}`"][policy]
    elif _ORDER.index(risk) >= _ORDER.index(act_at):
        cell = table["ran, risk at `--act-at` or above"][policy]
    else:
        cell = table["ran, risk below `--act-at`"][policy]
    if stream == "pass" and (found := re.search(r"`--stream pass`: (\w+)", cell)):
        return found.group(1)
    return cell.split()[0]


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """One real report per risk."""
    low = asyncio.run(_report(GOOD, [True, True]))
    claims = low.claims
    down = Failure(kind="model_unavailable", message="the judge is down", stage="debate", transient=True)
    return {
        "none": low.model_copy(update={"verdict": "no_claims", "claims": []}),
        "low": low,
        "moderate": low.model_copy(
            update={"claims": [claims[0], claims[1].model_copy(update={"label": "not_enough_evidence"})]}
        ),
        "high": low.model_copy(update={"claims": [claims[0], claims[1].model_copy(update={"label": "non_factual"})]}),
        "could not run": low.model_copy(update={"claims": [claims[0].model_copy(update={"failure": down}), claims[1]]}),
    }


def test_every_cell_acts_as_the_documented_table_says(reports: dict[str, Report]) -> None:
    table = documented()
    cells = list(itertools.product(RISKS, POLICIES, ACT_AT, STREAMS, ON_FAILURE))
    assert len(cells) == 180
    for risk, policy, act_at, stream, on in cells:
        chosen = RouteSettings(policy=policy, debate="inline", on_failure=on, act_at=act_at)
        found = verification(reports[risk], request_id="r", chosen=chosen, block_below=None, sources=2)
        if isinstance(found, str):
            done = failed(found, request_id="r", chosen=chosen, sources=2)
            assert risk == "could not run" and done.risk is None
        else:
            assert found.risk == risk  # the report really is at this risk
            done = act(found, chosen, stream=stream)  # type: ignore[arg-type]
        cell = (risk, policy, act_at, stream, on)
        assert done.action == expected(table, *cell), cell
        if done.action == "flagged" and policy == "block":
            assert "could not be blocked" in done.notes[-1], cell
