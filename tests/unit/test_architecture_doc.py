"""docs/architecture.md's diagram names every built-in of each stage it lists, as pyproject.toml registers them
(it once listed 2 of 3 prefilters and 2 of 5 teams), and every exception class of the package is in the one
hierarchy its error section draws (15 once lived outside it, three not rooted in it)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
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


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package's modules, by its module-qualified name."""
    found: dict[str, type[BaseException]] = {}
    for top in ("debate", "agents", "experiments", "markov_debate"):
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, f"{top}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                    found[f"{info.name}.{name}"] = value
    return found


def test_every_exception_class_is_in_the_one_hierarchy() -> None:
    from debate.errors import DebateError

    classes = _exception_classes()
    assert len(classes) > 30  # the walk reached the layers, not only debate/errors.py
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, DebateError))
    # a scripted test client out of replies must fail the test, never become an unverifiable claim; SIGTERM
    # unwinds as a Ctrl-C does, so no `except Exception` (or DebateError) may stop it
    assert outside == ["debate.concurrency.Terminated", "debate.testing.ScriptExhaustedError"]
    assert issubclass(classes["debate.concurrency.Terminated"], KeyboardInterrupt)
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("| Class | Where | Derives from |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+Error)`", table))
    for name, cls in classes.items():
        if name.startswith(("debate.errors.", "debate.testing.")) or name in outside:
            continue
        # named in the table, or one of the kinds of a class the table names ("and its three kinds")
        assert any(base.__name__ in named for base in cls.__mro__), name
        assert cls.__module__.replace(".", "/") + ".py" in table, name
