"""Project rules that are checked, not hoped for: lint, types, import direction, README <-> CI."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from debate.extras import missing_modules

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("debate", {"agents", "experiments", "desk"}), ("agents", {"experiments", "desk"}), ("experiments", {"desk"})],
)
def test_imports_flow_one_way(package: str, forbidden: set[str]) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & forbidden) for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_one_module_imports_the_openai_sdk() -> None:
    users = sorted(
        str(p.relative_to(ROOT))
        for pkg in ("debate", "agents", "experiments", "desk")
        for p in (ROOT / pkg).rglob("*.py")
        if "openai" in _imports(p)
    )
    assert users == ["debate/llm/openai_client.py"]


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff")
    assert ruff, "ruff is a test dependency"
    for args in (["check", "."], ["format", "--check", "."]):
        done = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean() -> None:
    """mypy --strict passes on whatever extras are installed: the desk package needs its extra's libraries to be
    typed at all, so without them it is left out (every other module is checked either way)."""
    command = [sys.executable, "-m", "mypy"]
    if missing_modules("desk"):
        command += ["--exclude", "^desk/"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean_on_the_tests() -> None:
    """The tests are typed code too (strict, as the packages): a helper's wrong signature shows here, not as a
    puzzling failure at run time. They import every extra, so this runs where the full test install is."""
    if missing_modules("desk"):
        pytest.skip("the desk extra is not installed: its tests cannot be typed")
    done = subprocess.run([sys.executable, "-m", "mypy", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second() -> None:
    commands = _setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    install_and_run, install_and_test = commands
    assert "debate verify" in install_and_run and "--base-url" not in install_and_run
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
    for pkg in ("debate", "agents", "experiments", "desk", "markov_debate"):
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
