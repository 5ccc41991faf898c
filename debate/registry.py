"""One small generic registry: name -> factory, for every stage of the pipeline.

Built-ins register themselves in-process when their module is imported; installed packages add implementations
through entry points (group `markov_debate.<stage>`), loaded lazily on first lookup. So an extension is one file in
the project, or one installed package, and the engine never imports the packages that implement its protocols
(imports flow experiments -> agents -> debate).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from debate.errors import UsageError

__all__ = ["Registry", "UnknownNameError"]

F = TypeVar("F")


class UnknownNameError(UsageError, LookupError):
    """No implementation is registered under the name; the message lists the known ones and the closest match."""


class Registry(Generic[F]):
    """Implementations of one stage. `builtins` names modules that register the project's own implementations."""

    def __init__(self, stage: str, *, builtins: tuple[str, ...] = ()) -> None:
        self.stage = stage
        self.group = f"markov_debate.{stage}"
        self._builtins = builtins
        self._entries: dict[str, F] = {}
        self._descriptions: dict[str, str] = {}
        self._loaded = False
        self._builtins_loaded = False

    def register(self, name: str, factory: F, *, description: str = "") -> F:
        """Register `factory` under `name` (a later registration of the same name replaces it)."""
        self._entries[name] = factory
        self._descriptions[name] = description or (getattr(factory, "__doc__", None) or "").strip().split("\n")[0]
        return factory

    def _load_builtins(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            for module in self._builtins:
                importlib.import_module(module)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._load_builtins()
        for entry in entry_points(group=self.group):
            if entry.name not in self._entries:
                self.register(entry.name, entry.load())

    def get(self, name: str) -> F:
        """The factory registered as `name`; UnknownNameError (with a "did you mean") otherwise. Only that name's
        entry point is imported: a plugin's module costs start-up only when it is used."""
        self._load_builtins()
        if name not in self._entries and not self._loaded:
            for entry in entry_points(group=self.group, name=name):
                self.register(entry.name, entry.load())
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.unknown(name)) from None

    def unknown(self, name: str) -> str:
        known = self.names()
        # A name pasted by mistake can be long: the message quotes its start, and difflib is not run on it.
        close = difflib.get_close_matches(name, known, n=1) if len(name) <= 100 else []
        hint = f"; did you mean {close[0]!r}?" if close else ""
        what = self.stage[:-1] if self.stage.endswith("s") else self.stage
        shown = repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name)} characters)"
        return f"unknown {what} {shown} (known: {', '.join(known) or 'none'}){hint}"

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def describe(self, name: str) -> str:
        self._load()
        return self._descriptions.get(name, "")

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
