"""The built-ins are entry points of the project's own pyproject.toml, registered exactly as a plugin's are; each
registry also lists their one-line descriptions without importing them, so that `debate --help` does not import the
engine: the descriptions must be of what the entry points declare."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from debate.errors import PluginLoadError
from debate.plugins import CHAINS, PREFILTERS, RETRIEVERS, ROLLUPS, SEARCH_BACKENDS, TASKS
from debate.registry import DISTRIBUTION, Registry
from tests.support.helpers import ROOT

REGISTRIES = [TASKS, RETRIEVERS, SEARCH_BACKENDS, PREFILTERS, ROLLUPS, CHAINS]
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.stage)
def test_the_built_ins_are_the_project_s_entry_points_and_each_loads(registry: Registry[object]) -> None:
    ours = {e.name: e.value for e in entry_points(group=registry.group) if e.dist and e.dist.name == DISTRIBUTION}
    # the installed metadata is the checkout's (a stale install would miss a new built-in)
    assert ours == DECLARED[registry.group]
    assert set(registry._listed) == set(ours)
    for name in ours:
        assert registry.get(name) is not None and registry.describe(name)


def test_a_built_in_without_its_entry_point_says_the_install_is_missing() -> None:
    registry: Registry[object] = Registry("widgets", listed={"gear": "a widget"})
    with pytest.raises(PluginLoadError, match=r"built-in widget 'gear' has no entry point.*pip install -e \."):
        registry.get("gear")


def test_a_folder_that_shadows_an_installed_package_is_named(tmp_path: Path) -> None:
    """A user's own `agents/` next to their notebook hides ours: the team does not load, and the message says
    which entry point, from which distribution, and where `agents` was found."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "agents" / "team.py").write_text("TEAM = 'mine'\n", encoding="utf-8")
    probe = "from debate.plugins import TEAMS; TEAMS.get('autogen')"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("debate.errors.PluginLoadError: entry point autogen = agents.team:AutogenTeamFactory")
    assert f"from {DISTRIBUTION}" in last and str(tmp_path / "agents" / "__init__.py") in last


def test_listing_the_choices_imports_no_engine() -> None:
    """What `debate --help` needs of the registries (names, descriptions) comes without the debate team."""
    probe = (
        "import sys; from debate.plugins import CHAINS, PREFILTERS, ROLLUPS, TASKS;"
        "[r.names() for r in (CHAINS, PREFILTERS, ROLLUPS, TASKS)]; [TASKS.describe(n) for n in TASKS.names()];"
        "print(sorted(m for m in ('debate.engine', 'debate.pipeline', 'debate.tasks', 'networkx') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]", shown
