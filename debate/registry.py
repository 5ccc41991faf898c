"""One small generic registry: name -> factory, for every stage of the pipeline.

Built-ins register themselves in-process when their module is imported; installed packages add implementations
through entry points (group `markov_debate.<stage>`), loaded lazily on first lookup. So an extension is one file in
the project, or one installed package, and the engine never imports the packages that implement its protocols
(imports flow experiments -> agents -> debate).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoints, entry_points
from typing import Generic, TypeVar

from debate.errors import UnknownNameError

__all__ = ["Registry", "UnknownNameError", "installed_entry_points"]

F = TypeVar("F")


def installed_entry_points(group: str) -> EntryPoints:
    """The installed entry points of `group`. All of them are read once per process: each reading scans every
    installed distribution (30 ms here with 300 of them), and the registries and the command line all list theirs."""
    if not _BY_GROUP:
        everything = entry_points()
        _BY_GROUP.update({name: everything.select(group=name) for name in everything.groups})
        _BY_GROUP.setdefault("", EntryPoints(()))  # read, even when nothing is installed
    return _BY_GROUP.get(group, EntryPoints(()))


_BY_GROUP: dict[str, EntryPoints] = {}


class Registry(Generic[F]):
    """Implementations of one stage. `builtins` names modules that register the project's own implementations."""

    def __init__(self, stage: str, *, builtins: tuple[str, ...] = (), listed: Mapping[str, str] | None = None) -> None:
        self.stage = stage
        self.group = f"markov_debate.{stage}"
        self._builtins = builtins
        self._listed = dict(listed or {})
        """The names (and one-line descriptions) the builtin modules register, known without importing them:
        listing the choices (`debate --help`) costs no import of the engine."""
        self._entries: dict[str, F] = {}
        self._descriptions: dict[str, str] = {}
        self._loaded = False
        self._builtins_loaded = False
        self._declared: frozenset[str] | None = None

    def register(self, name: str, factory: F, *, description: str = "") -> F:
        """Register `factory` under `name` (a later registration of the same name replaces it)."""
        self._entries[name] = factory
        doc = (getattr(factory, "__doc__", None) or "").strip().split("\n")[0]
        self._descriptions[name] = description or self._listed.get(name) or doc
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
        for entry in installed_entry_points(self.group):
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
        """Every name: the builtins' as listed, those registered so far, and the entry points' (read from package
        metadata; no plugin module is imported until its name is used)."""
        if not self._listed:
            self._load()
            return sorted(self._entries)
        if self._declared is None:
            self._declared = frozenset(entry.name for entry in installed_entry_points(self.group))
        return sorted({*self._listed, *self._entries, *self._declared})

    def describe(self, name: str) -> str:
        if name in self._descriptions:
            return self._descriptions[name]
        if name in self._listed:
            return self._listed[name]
        self._load()
        return self._descriptions.get(name, "")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
