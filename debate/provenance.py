"""What a run records about the code that produced it: the package version and the git commit, looked up once."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["depended_files", "file_sha256", "git_commit", "package_version"]


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout this package runs from, if any."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


@functools.cache
def package_version() -> str:
    """The installed version of markov-debate ("unknown" when run from a tree that is not installed)."""
    try:
        return version("markov-debate")
    except PackageNotFoundError:
        return "unknown"


_DEPENDED = (
    ("debate", "calibration"),
    ("debate", "chain"),
    ("search", "collection"),
    ("search", "queries_prompt"),
    ("claims", "prompt"),
    ("prompt_set",),
)
"""Settings that may name a file (or a folder of prompt files) whose content decides verdicts. A name of a
packaged chain, prompt or prompt set names no file here and is left out."""


def depended_files(config: dict[str, Any]) -> dict[str, str]:
    """The sha256 of each file the verdicts of a run under `config` (VerifierConfig as JSON) depend on, by the
    setting that names it (`debate.calibration`, `debate.chain`, `search.collection`, `prompt_set` when a folder,
    `debate.cascade.<i>.calibration` for each cascade team, and `debate.chain.prompts.<role>` for each prompt file a
    chain file names): a file changed in place, under the same name, is then a changed setting, and the same bytes
    at another path the same setting (debate.results compares content where both sides have it). A named file that
    cannot be read is left out (the run itself refuses it)."""
    found: dict[str, str] = {}
    for path in _DEPENDED:
        value: Any = config
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        _add(found, ".".join(path), value)
    cascade = (config.get("debate") or {}).get("cascade") or []
    for index, team in enumerate(cascade if isinstance(cascade, list) else []):
        _add(found, f"debate.cascade.{index}.calibration", team.get("calibration") if isinstance(team, dict) else None)
    chain = (config.get("debate") or {}).get("chain")
    if "debate.chain" in found and isinstance(chain, str):
        for role, prompt in _chain_prompt_files(Path(chain)).items():
            _add(found, f"debate.chain.prompts.{role}", str(prompt))
    return found


def _add(found: dict[str, str], key: str, value: Any) -> None:
    if isinstance(value, str) and value and "\0" not in value:
        digest = _digest(Path(value))
        if digest is not None:
            found[key] = digest


def file_sha256(path: Path) -> str | None:
    """A file's (or a folder's) sha256 as depended_files records it; None when it cannot be read."""
    return _digest(path)


def _chain_prompt_files(chain: Path) -> dict[str, Path]:
    """The prompt files a chain spec file names for its roles (`[roles.<role>] prompt = "x.toml"`, relative to the
    chain file), as the engine resolves them (ChainSpec.prompt_name); none when the file does not parse (the run
    refuses it)."""
    try:
        text = chain.read_text(encoding="utf-8")
        raw: Any = json.loads(text) if chain.suffix.lower() == ".json" else tomllib.loads(text)
    except (OSError, ValueError, RecursionError):
        return {}
    roles = raw.get("roles") if isinstance(raw, dict) else None
    found: dict[str, Path] = {}
    for role, spec in (roles if isinstance(roles, dict) else {}).items():
        prompt = spec.get("prompt") if isinstance(spec, dict) else None
        if isinstance(prompt, str) and prompt.endswith(".toml"):
            found[str(role)] = Path(prompt) if prompt.startswith("/") else chain.resolve().parent / prompt
    return found


def _digest(path: Path) -> str | None:
    """A file's sha256, or a folder's over its files' names and contents (sorted); None when unreadable. A file's
    digest is kept while its size, mtime and inode stay (a resume compares settings more than once a run)."""
    try:
        if path.is_dir():
            sha = hashlib.sha256()
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                sha.update(child.relative_to(path).as_posix().encode() + b"\0" + child.read_bytes() + b"\0")
            return sha.hexdigest()
        if path.is_file():
            stat = path.stat()
            return _file_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    except (OSError, ValueError):
        return None
    return None


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int, inode: int) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()
