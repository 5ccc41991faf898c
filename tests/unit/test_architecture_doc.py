"""docs/architecture.md's diagram names every built-in of each stage it lists, as pyproject.toml registers them
(it once listed 2 of 3 prefilters and 2 of 5 teams)."""

from __future__ import annotations

import re
import tomllib

from tests.support.helpers import ROOT


def test_the_diagram_lists_every_registered_built_in() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = text.split("```\n", 2)[1]
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    # each `markov_debate.<stage>` label and the names written to its right, on its line and those below it
    labelled: dict[str, str] = {}
    current = None
    for line in diagram.splitlines():
        right = line[34:] if len(line) > 34 else ""
        found = re.match(r"\s*(markov_debate\.\w+)\s+(.*)", right)
        if found:
            current = found.group(1)
            labelled[current] = found.group(2)
        elif current is not None and right.strip() and not right.strip().startswith("("):
            labelled[current] += " " + right.strip()
    for stage in ("tasks", "prefilters", "teams", "chains", "rollups"):
        shown = labelled[f"markov_debate.{stage}"]
        missing = [name for name in groups[f"markov_debate.{stage}"] if not re.search(rf"\b{re.escape(name)}\b", shown)]
        assert not missing, (stage, missing, shown)
