"""Prompt files: loaded by name from the `prompts` package (or a directory), with declared variables and a hash."""

from __future__ import annotations

import hashlib
import importlib.resources
import string
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["PromptError", "PromptTemplate", "load_prompt"]


class PromptError(ValueError):
    """A prompt file is malformed, or rendering it was given the wrong variables."""


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

    def render(self, **values: str) -> tuple[str, str]:
        """Return (system, user). A missing or unexpected variable fails loudly."""
        missing = [v for v in self.variables if v not in values]
        unexpected = sorted(set(values) - set(self.variables))
        if missing or unexpected:
            raise PromptError(f"prompt {self.name!r}: missing variables {missing}, unexpected variables {unexpected}")
        return string.Template(self.system).substitute(values), string.Template(self.user).substitute(values)


def _parse(name: str, data: bytes, origin: str) -> PromptTemplate:
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PromptError(f"{origin}: not valid TOML: {exc}") from exc
    try:
        prompt = PromptTemplate.model_validate(
            {
                **raw,
                "name": name,
                "sha256": hashlib.sha256(data).hexdigest(),
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


@lru_cache(maxsize=64)
def load_prompt(name: str, directory: str | None = None) -> PromptTemplate:
    """Load `<name>.toml` from `directory`, or from the packaged `prompts/`."""
    if directory is not None:
        path = Path(directory) / f"{name}.toml"
        if not path.is_file():
            raise PromptError(f"prompt {name!r} not found: {path}")
        return _parse(name, path.read_bytes(), str(path))
    resource = importlib.resources.files("prompts").joinpath(f"{name}.toml")
    if not resource.is_file():
        raise PromptError(f"prompt {name!r} not found in the packaged prompts/")
    return _parse(name, resource.read_bytes(), f"prompts/{name}.toml")
