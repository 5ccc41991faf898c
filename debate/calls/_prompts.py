"""Prompt files: loaded by name from the `prompts` package (or a directory), with declared variables and a hash."""

from __future__ import annotations

import hashlib
import importlib.resources
import re
import string
import tomllib
from functools import lru_cache
from importlib.resources.abc import Traversable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate.config import PROMPT_SETS
from debate.errors import PromptError

__all__ = ["DEFAULT_PROMPT_SET", "PROMPT_SETS", "PromptError", "PromptTemplate", "load_prompt"]


class PromptTemplate(BaseModel):
    """A system + user message pair with `$variable` placeholders (string.Template syntax, `$$` for a dollar)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The prompt's name (its file name without .toml)."""
    description: str = ""
    """What the prompt is for."""
    variables: tuple[str, ...]
    """Every placeholder the messages use; rendering needs exactly these."""
    system: str = ""
    """System message template (empty for follow-up messages such as a re-ask)."""
    user: str = Field(min_length=1)
    """User message template."""
    sha256: str
    """Hash of the prompt file's bytes."""
    not_enough_evidence: bool = False
    """The prompt lets an agent answer that the evidence cannot decide the claim (`"enough evidence": false`)."""

    def render(self, **values: str) -> tuple[str, str]:
        """Return (system, user). A missing or unexpected variable fails loudly."""
        missing = [v for v in self.variables if v not in values]
        unexpected = sorted(set(values) - set(self.variables))
        if missing or unexpected:
            raise PromptError(f"prompt {self.name!r}: missing variables {missing}, unexpected variables {unexpected}")
        return string.Template(self.system).substitute(values), string.Template(self.user).substitute(values)


DEFAULT_PROMPT_SET = "paper"


def _search_path(prompt_set: str | None) -> list[Traversable]:
    """Where a set's files are looked up, in order: the set, then (for a user directory) the paper set, then the
    shared prompts every set uses (re-ask, extraction, queries, baselines)."""
    root = importlib.resources.files("prompts")
    chosen = prompt_set or DEFAULT_PROMPT_SET
    if chosen == DEFAULT_PROMPT_SET:
        return [root.joinpath(chosen), root]
    if chosen in PROMPT_SETS:
        # A packaged variant holds only the files it changes.
        return [root.joinpath(chosen), root.joinpath(DEFAULT_PROMPT_SET), root]
    path = Path(chosen)
    if not path.is_dir():
        raise PromptError(f"prompt set {chosen!r} is neither a packaged set ({', '.join(PROMPT_SETS)}) nor a directory")
    return [path, root.joinpath(DEFAULT_PROMPT_SET), root]


def _find(file: str, prompt_set: str | None) -> tuple[bytes, str]:
    for place in _search_path(prompt_set):
        candidate = place.joinpath(file)
        if candidate.is_file():
            return candidate.read_bytes(), str(candidate)
    raise PromptError(f"{file} not found in prompt set {prompt_set or DEFAULT_PROMPT_SET!r}")


def _fragment(name: str, directory: str | None) -> bytes:
    """A shared text (e.g. the severity rubric) that prompt files include by name: `<name>.txt`."""
    return _find(f"{name}.txt", directory)[0]


def _include(template: str, name: str, text: str) -> str:
    # The included text is inserted literally: its own `$` signs are escaped for the later substitution.
    return re.sub(rf"\$(?:\{{{name}\}}|{name}(?![A-Za-z0-9_]))", lambda _: text.replace("$", "$$"), template)


def _parse(name: str, data: bytes, origin: str, directory: str | None = None) -> PromptTemplate:
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PromptError(f"{origin}: not valid TOML: {exc}") from exc
    includes = raw.pop("includes", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise PromptError(f"{origin}: `includes` must be a list of names")
    digest = hashlib.sha256(data)
    for include in includes:
        fragment = _fragment(include, directory)
        # The hash covers what the model is sent: an edit of an included text changes every including prompt's hash.
        digest.update(b"\0" + include.encode() + b"\0" + fragment)
        text = fragment.decode("utf-8").rstrip("\n")
        for part in ("system", "user"):
            if isinstance(raw.get(part), str):
                raw[part] = _include(raw[part], include, text)
    try:
        prompt = PromptTemplate.model_validate(
            {
                **raw,
                "name": name,
                "sha256": digest.hexdigest(),
                "variables": tuple(raw.get("variables", ())),
            }
        )
    except ValidationError as exc:
        raise PromptError(f"{origin}: {exc}") from exc
    used: set[str] = set()
    for part in (prompt.system, prompt.user):
        template = string.Template(part)
        if not template.is_valid():
            raise PromptError(f"{origin}: a `$` is not followed by a variable name (write `$$` for a dollar sign)")
        used.update(template.get_identifiers())
    declared = set(prompt.variables)
    if used != declared:
        raise PromptError(f"{origin}: declared variables {sorted(declared)} differ from those used {sorted(used)}")
    return prompt


@lru_cache(maxsize=16)
def _set_options(prompt_set: str | None) -> dict[str, object]:
    """A set's `set.toml` (optional): options that apply to every prompt of the set."""
    place = _search_path(prompt_set)[0].joinpath("set.toml")
    if not place.is_file():
        return {}
    try:
        options = tomllib.loads(place.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{place}: not valid TOML: {exc}") from exc
    unknown = sorted(set(options) - {"description", "not_enough_evidence"})
    if unknown:
        raise PromptError(f"{place}: unknown option(s) {unknown}")
    return options


@lru_cache(maxsize=128)
def load_prompt(name: str, prompt_set: str | None = None) -> PromptTemplate:
    """Load `<name>.toml` from a prompt set (a packaged set name or a directory; default `paper`), falling back to
    the shared prompts; a name ending in .toml is a file path."""
    if name.endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise PromptError(f"prompt file not found: {path}")
        return _parse(path.stem, path.read_bytes(), str(path), prompt_set or str(path.parent))
    data, origin = _find(f"{name}.toml", prompt_set)
    prompt = _parse(name, data, origin, prompt_set)
    if _set_options(prompt_set).get("not_enough_evidence") is True:
        prompt = prompt.model_copy(update={"not_enough_evidence": True})
    return prompt
