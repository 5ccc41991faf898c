"""An import-linter contract type: no module imports another package's private modules or names.

`debate.llm._cache` is private to `debate.llm`: a module outside `debate.llm` imports what the package exports
(`from debate.llm import CachingChatClient`), so a package can rearrange its insides without breaking its users.
A name that starts with one underscore, module or not, is the private part; the package that holds it (and
everything below that package) may use it. Checked on the source, type-only imports included, for the root
packages and for the script folders named in `scripts` (benchmarks, which are not a package)."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

__all__ = ["PrivateImportsContract", "private_imports"]


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return
    root = Path(next(iter(spec.submodule_search_locations)))
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if is_package else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        return [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return []


def _private_owner(name: str) -> str | None:
    """The package a dotted name's first private part belongs to, or None when it has no private part."""
    parts = name.split(".")
    for index, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def private_imports(modules: list[tuple[str, Path]]) -> list[tuple[str, int, str]]:
    """(importer, line, imported) for every import of a private part from outside the package that holds it."""
    found = []
    for module, path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for name in _imported(node, module, path.name == "__init__.py"):
                owner = _private_owner(name)
                if owner is not None and not (module == owner or module.startswith(f"{owner}.")):
                    found.append((module, getattr(node, "lineno", 0), name))
    return found


class PrivateImportsContract(Contract):
    """`type = "private"` in [[tool.importlinter.contracts]]; `scripts` lists folders of scripts to check too."""

    scripts = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        modules = [item for package in sorted(self._roots(graph)) for item in _modules(package)]
        for folder in self.scripts:  # type: ignore[attr-defined]
            modules += [(path.stem, path) for path in sorted(Path(str(folder)).glob("*.py"))]
        found = private_imports(modules)
        return ContractCheck(kept=not found, metadata={"found": found})

    def _roots(self, graph: Any) -> set[str]:
        return {str(name).split(".")[0] for name in graph.modules}

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line, imported in check.metadata["found"]:
            output.print_error(f"{importer} (l.{line}) imports {imported}, private to {_private_owner(imported)}")
        output.new_line()
