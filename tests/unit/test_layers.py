"""The base reads as layers: no circle between packages (type-only imports counted), no import of another package's
private parts, every error class in debate.errors, and the built-ins implementing the plugin protocols they are
registered under (checked by mypy on this file)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import grimp
import networkx as nx
import pytest

import debate.errors
from agents import AutogenTeamFactory
from debate.engine import load_chain
from debate.evidence import RetrievalCache
from debate.plugins import Chain, EvidenceCache, TeamFactory
from debate.types import FailureKind
from tests.support.helpers import ROOT
from tests.support.private_imports import private_imports

PACKAGES = ("debate", "agents", "experiments", "markov_debate")


def _package(module: str) -> str:
    """A module's package two levels down (debate.engine, agents, markov_debate.desk), the unit a circle is about."""
    return ".".join(module.split(".")[:2]) if module.startswith(("debate.", "markov_debate.")) else module.split(".")[0]


def test_no_circle_between_packages_counting_type_only_imports() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    packages = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if _package(module) != _package(imported):
                packages.add_edge(_package(module), _package(imported))
    circles = list(nx.simple_cycles(packages))
    assert circles == [], circles


def test_the_private_imports_contract_finds_what_it_forbids(tmp_path: Path) -> None:
    files = {
        "debate.cli.x": "from debate.llm._cache import CACHE_FILE\n",
        "debate.cli.y": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import debate.engine._graph\n",
        "bench": "from experiments.dynamics.commands import _agrees\n",
        "debate.llm._cache2": "from debate.llm._cache import CACHE_FILE\nfrom . import _base\n",  # its own package
        "debate.cli.z": "from ..llm import _base\n",
    }
    modules = []
    for name, text in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        modules.append((name, path))
    found = {(importer, imported) for importer, _, imported in private_imports(modules)}
    assert found == {
        ("debate.cli.x", "debate.llm._cache.CACHE_FILE"),
        ("debate.cli.y", "debate.engine._graph"),
        ("bench", "experiments.dynamics.commands._agrees"),
        ("debate.cli.z", "debate.llm._base"),
    }


def test_every_error_class_lives_in_debate_errors() -> None:
    bases = set(debate.errors.__all__)
    elsewhere = []
    for path in sorted((ROOT / "debate").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "debate":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                named = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if named & bases:
                    elsewhere.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert elsewhere == []


@pytest.mark.parametrize("name", debate.errors.__all__)
def test_each_error_kind_is_a_failure_kind(name: str) -> None:
    error = getattr(debate.errors, name)
    if isinstance(error, type) and issubclass(error, debate.errors.DebateError):
        assert error.kind in typing.get_args(FailureKind), name


def test_the_built_ins_implement_the_plugin_protocols() -> None:
    # mypy --strict on this file is the check: each assignment is to the protocol the plugin API declares
    factory: TeamFactory = AutogenTeamFactory()
    chain: Chain = load_chain("true-to-skeptic")
    cache: EvidenceCache = RetrievalCache()
    assert factory.prompt_hashes(chain) and cache.get("absent") is None
