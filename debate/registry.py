"""One small generic registry: name -> factory, for every stage of the pipeline.

Implementations are entry points in the group `markov_debate.<stage>`, the project's built-ins (declared in its
pyproject.toml) exactly as an installed plugin's, loaded lazily on first lookup: an extension is one installed
package, no module is imported for its side effect, and the engine never imports the packages that implement its
protocols (imports flow experiments -> agents -> debate). `register` adds one in-process (a notebook, a test).
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any, Generic, TypeVar

from debate.errors import PluginLoadError, UnknownNameError

__all__ = ["DISTRIBUTION", "Registry", "UnknownNameError", "installed_entry_points"]

F = TypeVar("F")
log = logging.getLogger(__name__)

DISTRIBUTION = "markov-debate"
"""The distribution whose entry points are the built-ins: on a name clash they win over a plugin's."""


def installed_entry_points(group: str) -> EntryPoints:
    """The installed entry points of `group`. All of them are read once per process: each reading scans every
    installed distribution (30 ms here with 300 of them), and the registries and the command line all list theirs."""
    if not _BY_GROUP:
        everything = entry_points()
        _BY_GROUP.update({name: everything.select(group=name) for name in everything.groups})
        _BY_GROUP.setdefault("", EntryPoints(()))  # read, even when nothing is installed
    return _BY_GROUP.get(group, EntryPoints(()))


_BY_GROUP: dict[str, EntryPoints] = {}


def _dist_name(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return str(getattr(dist, "name", "") or "an unknown distribution")


def load_entry(entry: EntryPoint) -> Any:
    """The object `entry` names; PluginLoadError naming it, its distribution and where its top-level module was
    found when it does not import (a user's own `agents/` folder on sys.path shadows ours)."""
    try:
        return entry.load()
    except (ImportError, AttributeError) as exc:
        top = entry.module.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        found = f"; module {top!r} is {spec.origin or 'a namespace package'}" if spec is not None else ""
        raise PluginLoadError(
            f"entry point {entry.name} = {entry.value} (group {entry.group}, from {_dist_name(entry)}) does not "
            f"load: {type(exc).__name__}: {exc}{found}; a folder named {top!r} on sys.path (the working directory?) "
            "hides an installed package of that name, and a source checkout must be installed (pip install -e .) "
            "for its entry points to exist"
        ) from exc


class Registry(Generic[F]):
    """Implementations of one stage: entry points of `markov_debate.<stage>` and in-process registrations."""

    def __init__(self, stage: str, *, listed: Mapping[str, str] | None = None) -> None:
        self.stage = stage
        self.group = f"markov_debate.{stage}"
        self._listed = dict(listed or {})
        """The built-ins' one-line descriptions, known without importing them: listing the choices (`debate
        --help`) costs no import of the engine. Their entry points are what registers them."""
        self._entries: dict[str, F] = {}
        self._descriptions: dict[str, str] = {}
        self._loaded = False
        self._declared: frozenset[str] | None = None

    def register(self, name: str, factory: F, *, description: str = "") -> F:
        """Register `factory` under `name` in this process (a later registration of the same name replaces it)."""
        self._entries[name] = factory
        doc = (getattr(factory, "__doc__", None) or "").strip().split("\n")[0]
        self._descriptions[name] = description or self._listed.get(name) or doc
        return factory

    def _entry(self, name: str) -> EntryPoint | None:
        found = list(installed_entry_points(self.group).select(name=name))
        if len(found) > 1:
            ours = [e for e in found if _dist_name(e) == DISTRIBUTION]
            others = ", ".join(sorted({_dist_name(e) for e in found if e not in ours}))
            log.warning("%s %r is declared by %s too; the built-in is used", self.stage[:-1], name, others)
            found = ours or found
        return found[0] if found else None

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for name in sorted({entry.name for entry in installed_entry_points(self.group)}):
            if name not in self._entries and (entry := self._entry(name)) is not None:
                self.register(name, load_entry(entry))

    def get(self, name: str) -> F:
        """The factory registered as `name`; UnknownNameError (with a "did you mean") otherwise. Only that name's
        entry point is imported: a module costs start-up only when its name is used."""
        if name not in self._entries and (entry := self._entry(name)) is not None:
            self.register(name, load_entry(entry))
        if name not in self._entries and name in self._listed:
            raise PluginLoadError(
                f"the built-in {self.stage[:-1]} {name!r} has no entry point in {self.group}: {DISTRIBUTION}'s "
                "package metadata is missing or older than its source; install it (pip install -e .)"
            )
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
        """Every name: the entry points' (read from package metadata; no module is imported until its name is
        used) and those registered in this process."""
        if self._declared is None:
            self._declared = frozenset(entry.name for entry in installed_entry_points(self.group))
        return sorted({*self._entries, *self._declared})

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
