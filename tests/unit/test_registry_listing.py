"""Each registry lists its builtin names (and their one-line descriptions) without importing the modules that
register them, so that `debate --help` does not import the engine: the list must be what those modules register."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from debate.plugins import CHAINS, PREFILTERS, RETRIEVERS, ROLLUPS, SEARCH_BACKENDS, TASKS
from debate.registry import Registry

REGISTRIES = [TASKS, RETRIEVERS, SEARCH_BACKENDS, PREFILTERS, ROLLUPS, CHAINS]


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.stage)
def test_the_listed_builtins_are_what_the_builtin_modules_register(registry: Registry[object]) -> None:
    # In a fresh process: this one's registries may hold entries of plugins other tests installed.
    probe = (
        "import json; from debate import plugins;"
        "r = next(r for r in vars(plugins).values()"
        f" if isinstance(r, plugins.Registry) and r.stage == {registry.stage!r});"
        "r._load_builtins(); print(json.dumps({n: r.describe(n) for n in r._entries}))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(shown) == registry._listed


def test_listing_the_choices_imports_no_engine() -> None:
    """What `debate --help` needs of the registries (names, descriptions) comes without the debate team."""
    probe = (
        "import sys; from debate.plugins import CHAINS, PREFILTERS, ROLLUPS, TASKS;"
        "[r.names() for r in (CHAINS, PREFILTERS, ROLLUPS, TASKS)]; [TASKS.describe(n) for n in TASKS.names()];"
        "print(sorted(m for m in ('debate.engine', 'debate.pipeline', 'debate.tasks', 'networkx') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]", shown
