"""docs/differences.md, "Where we differ from each source, and why", stays true: every row names tests that exist,
and every option the configuration documents as a named variant or departure has a row."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from pydantic import BaseModel

from debate import config
from debate.plugins import PREFILTERS, ROLLUPS, TASKS, stage_options
from tests.support.helpers import ROOT

PAGE = ROOT / "docs" / "differences.md"
_PINNED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _rows() -> list[str]:
    return [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ")][1:]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_row_is_pinned_by_tests_that_exist() -> None:
    rows = [r for r in _rows() if not r.startswith("| source") and not r.startswith("| ---")]
    assert len(rows) >= 30
    unpinned = [r[:80] for r in rows if not _PINNED.search(r.rsplit("|", 2)[-2])]
    missing = [
        f"{file}::{name}"
        for r in rows
        for file, name in _PINNED.findall(r)
        if not (ROOT / file).is_file() or name not in _tests_in(ROOT / file)
    ]
    assert (unpinned, missing) == ([], [])


def _option_models() -> list[type[BaseModel]]:
    """The configuration's models and the built-in stages' own options models (set the way a plugin's are)."""
    models = [
        model
        for model in vars(config).values()
        if inspect.isclass(model) and issubclass(model, BaseModel) and model.__module__ == "debate.config"
    ]
    for registry in (PREFILTERS, TASKS, ROLLUPS):
        for name in registry.names():
            model = stage_options(registry, name)
            if model is not None:
                models.append(model)
    return models


def test_every_named_variant_of_the_configuration_has_a_row() -> None:
    page = PAGE.read_text(encoding="utf-8")
    named = [
        field
        for model in _option_models()
        for field, info in model.model_fields.items()
        if re.search(r"named (variant|departure)", info.description or "")
    ]
    assert {"invalid_citation_decides", "budget", "when", "citation_variant", "dedupe", "queries_prompt"} <= set(named)
    # Variants that live outside the configuration models (the tool checks).
    named += ["endpoint-match", "permission-check", "max_attempts", "max_claims", "language"]
    assert [name for name in named if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", page)] == []
