"""Project rules that are checked, not hoped for: the package layout, one module on the OpenAI SDK, sizes without
squeezing, sources named as users know them, README <-> CI. Lint, types and the import layers are CI steps of their
own (`.ci/lint`, run by `.ci/run` before the tests)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.support.helpers import ROOT

PACKAGES = ("debate", "agents", "experiments", "markov_debate")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_engine_reads_like_the_pipeline() -> None:
    """debate/ holds one package per stage, the orchestrator, the front ends and the shared base, nothing else."""
    stages = {
        "tasks",
        "claims",
        "evidence",
        "engine",
        "calls",
        "prefilter",
        "rollup.py",
        "calibration",
        "results",
        "pipeline",
    }
    fronts = {"cli", "integrations"}
    base = {
        "config.py",
        "endpoints.py",
        "errors.py",
        "types",
        "llm",
        "registry.py",
        "plugins.py",
        "concurrency.py",
        "retry.py",
        "sentences.py",
        "sources.py",
        "extras.py",
        "files.py",
        "provenance.py",
        "telemetry.py",
        "testing.py",
        "workers.py",
    }
    found = {p.name for p in (ROOT / "debate").iterdir() if not p.name.startswith(("_", ".")) and p.name != "py.typed"}
    assert found == stages | fronts | base


def test_only_one_module_imports_the_openai_sdk() -> None:
    users = sorted(
        str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "openai" in _imports(p)
    )
    assert users == ["debate/llm/_openai_client.py"]


def test_ci_runs_lint_types_and_the_import_layers_as_a_step() -> None:
    lint = (ROOT / ".ci" / "lint").read_text()
    for command in ("ruff check .", "ruff format --check .", "mypy --num-workers auto", "lint-imports"):
        assert command in lint
    # mypy's one run covers the packages and the tests
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert set(files) == {*PACKAGES, "tests"}
    assert "bash .ci/lint" in (ROOT / ".ci" / "run").read_text()


def test_formatting_is_not_squeezed_under_the_caps() -> None:
    """The formatter's layout everywhere but a handful of tables that read better aligned."""
    skips = [
        f"{p.relative_to(ROOT)}:{i}"
        for top in (*PACKAGES, "tests", "benchmarks")
        for p in (ROOT / top).rglob("*.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "# fmt: skip" in line
    ]
    assert len(skips) < 20, skips


def test_sources_are_named_as_users_know_them() -> None:
    """No "seed 000"-style numbers in what users read: code, prompts, docs and README."""
    pattern = re.compile(r"\bseeds? 00\d", re.IGNORECASE)
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for top in (*PACKAGES, "prompts", "docs")
        for p in (ROOT / top).rglob("*")
        if p.suffix in {".py", ".md", ".toml", ".txt", ".html"}
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    found += [
        f"README.md:{i}"
        for i, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second() -> None:
    commands = _setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    install_and_run, install_and_test = commands
    assert "debate verify" in install_and_run and "--model.base-url" not in install_and_run
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_and_test in ci.splitlines()
    # pip checks what it installs against the environment: a package already installed --no-deps (its own
    # dependencies absent on purpose) would be reported as an ERROR on a clean install. They go last, --no-deps
    # installs skip that check.
    for command in commands:
        steps = command.split(" && ")
        no_deps = [i for i, step in enumerate(steps) if "--no-deps" in step]
        resolved = [i for i, step in enumerate(steps) if "pip install" in step and "--no-deps" not in step]
        assert no_deps and resolved and max(resolved) < min(no_deps), command


def test_no_function_over_60_lines_and_no_module_over_400() -> None:
    """Issue 23's size rule: a function that needs more than 60 lines, or a module more than 400, holds more than
    one concern (database migrations excepted)."""
    import ast

    long_functions, long_modules = [], []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            where = str(path.relative_to(ROOT))
            if len(source.splitlines()) > 400:
                long_modules.append(where)
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                    if node.end_lineno - node.lineno + 1 > 60:
                        long_functions.append(f"{where}:{node.lineno} {node.name}")
    assert (long_functions, long_modules) == ([], [])


def test_the_core_install_pulls_none_of_the_experiments_libraries() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    assert not [lib for lib in ("matplotlib", "scikit-learn", "scipy", "tabulate") if lib in core]
    assert {"matplotlib", "scikit-learn", "scipy", "tabulate"} <= {
        d.split(">")[0].split("=")[0] for d in project["optional-dependencies"]["experiments"]
    }


PUBLIC = (
    "debate",
    "debate.config",
    "debate.errors",
    "debate.plugins",
    "debate.types",
    "debate.llm",
    "debate.engine",
    "debate.claims",
    "debate.evidence",
    "debate.tasks",
    "debate.prefilter",
    "debate.results",
    "debate.pipeline",
    "debate.testing",
    "debate.sentences",
    "debate.rollup",
    "debate.registry",
)


def test_every_public_name_imports_from_where_it_is_listed() -> None:
    import importlib

    missing = [
        f"{module}.{name}"
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
        if not hasattr(importlib.import_module(module), name)
    ]
    assert missing == []
    import debate

    for name in (
        "VerifierConfig",
        "ModelConfig",
        "DebateConfig",
        "ClaimConfig",
        "RetrievalConfig",
        "SearchConfig",
        "PrefilterConfig",
        "TelemetryConfig",
        "ChatClient",
        "ScriptedChatClient",
        "__version__",
    ):
        assert name in debate.__all__


def test_every_public_class_and_function_says_what_it_is() -> None:
    """The API reference (docs/api.md) is generated from these docstrings."""
    import importlib
    import inspect

    undocumented = [
        f"{module}.{name}"
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
        if (inspect.isclass(obj := getattr(importlib.import_module(module), name)) or inspect.isfunction(obj))
        and not (obj.__doc__ or "").strip()
    ]
    assert undocumented == []


def test_the_profile_governs_every_property_and_the_docs_list_each_share() -> None:
    """No property pins its own example count (a literal max_examples); one that runs a share of the profile's
    says why, and docs/development.md's table lists each file and share as the code has them."""
    used: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("tests/conftest.py", "tests/support/properties.py", "tests/test_quality.py"):
            continue
        text = path.read_text()
        assert not re.search(r"max_examples=\d", text), f"{rel}: a literal max_examples (use examples(SHARE, why=...))"
        for share, why in re.findall(r"examples\(([\d.]+), why=\"([^\"]*)\"\)", text):
            assert why.strip(), rel
            used.add((rel, share))
    page = (ROOT / "docs" / "development.md").read_text()
    table = page.split("<!-- examples-shares -->", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"\| `(tests/[^`]+)` \| ([\d.]+) \|", table))
    assert documented == used, documented ^ used
