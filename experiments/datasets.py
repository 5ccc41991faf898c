"""Benchmark data by command: where it lives, and fetching it from the authors' own repositories.

Every file is recorded in `datasets.json` (beside this module) with the URL of its authors' copy at a pinned
commit, its size and its sha256; a download is installed only when both match. A dataset is installed whole or not
at all: its files are gathered in a staging folder (`.NAME.staging`, kept across interrupted runs, so a re-run only
fetches what is missing and resumes a cut-short file where the server allows it) and moved into place with one
rename. A mirror serves the same layout as the data folder (`MIRROR/halueval/qa_data.jsonl`), so another machine's
data folder, a proxy or a plain directory can stand in for the authors' hosts.

Where data is read from: `--data-dir` / DEBATE_DATA_DIR, else the user data directory when the dataset is installed
there, else a `shared/data` folder beside the checkout (the development layout), else the user data directory (whose
"not installed" error says how to fetch it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from debate.errors import DebateError, UsageError, validation_problem

__all__ = [
    "DATASET_NAMES",
    "Dataset",
    "DatasetFile",
    "FetchError",
    "InstalledDataset",
    "data_dir_for",
    "fetch_dataset",
    "installed_datasets",
    "load_manifest",
    "user_data_root",
]

DatasetName = Literal["halueval", "factprompts", "refchecker"]
DATASET_NAMES: tuple[DatasetName, ...] = ("halueval", "factprompts", "refchecker")
_MANIFEST = Path(__file__).with_name("datasets.json")
_MARKER = ".installed.json"


class FetchError(DebateError):
    """A download failed (unreachable host, HTTP error, cut short, checksum mismatch); nothing was installed."""


class DatasetFile(BaseModel):
    """One file of a dataset, as its authors publish it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    """Where it goes inside the dataset's folder (also its path on a mirror, under the folder)."""
    url: str
    """The authors' copy, at a pinned commit."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Checksum the download must have."""
    bytes: int = Field(ge=0)
    """Size the download must have."""
    records: int | None = None
    """JSON Lines records or JSON array entries (None for licence texts)."""


class Dataset(BaseModel):
    """A benchmark: its folder in the data directory and its files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str
    """Folder name inside a data directory (the experiments read `DATA_DIR/FOLDER/...`)."""
    source: str
    """Who made it, where it comes from, its licence."""
    files: tuple[DatasetFile, ...]
    """Every file, in download order."""

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)


class InstalledDataset(BaseModel):
    """What `debate data list` shows for one dataset."""

    name: DatasetName
    location: Path | None
    """Folder it is read from (None: not installed anywhere)."""
    how: Literal["fetched", "found", "missing"]
    """fetched: installed by `debate data fetch`; found: a folder with the files (DEBATE_DATA_DIR, shared/data)."""
    records: dict[str, int]
    """Records per data file."""
    verified: bool
    """Every file is there with its recorded size (a fetched dataset was checked against its sha256 on install)."""


_Manifest = TypeAdapter(dict[DatasetName, Dataset])


def load_manifest(path: Path | None = None) -> dict[DatasetName, Dataset]:
    """The recorded datasets (or another manifest of the same shape, for a mirror of other versions)."""
    source = path or _MANIFEST
    try:
        return _Manifest.validate_json(source.read_bytes())
    except OSError as exc:
        raise UsageError(f"--manifest: cannot read {source}: {exc.strerror}") from exc
    except ValidationError as exc:
        raise UsageError(f"--manifest {source}: {validation_problem(exc)}") from exc


def user_data_root() -> Path:
    """The user data directory's data folder (platformdirs; XDG_DATA_HOME on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("markov-debate", appauthor=False)) / "data"


def _shared_data() -> Path | None:
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for parent in (start, *start.parents):
            for candidate in (parent / "shared" / "data", parent.parent / "shared" / "data"):
                if (candidate / "halueval").is_dir():
                    return candidate
    return None


def data_dir_for(name: DatasetName | None = None, explicit: Path | None = None) -> Path:
    """The data directory to read `name` from (see the module docstring for the order)."""
    if explicit is not None:
        return explicit
    env = os.environ.get("DEBATE_DATA_DIR")
    if env:
        return Path(env)
    user = user_data_root()
    manifest = load_manifest()
    wanted = [name] if name is not None else list(DATASET_NAMES)
    if any((user / manifest[n].folder / _MARKER).is_file() for n in wanted):
        return user
    return _shared_data() or user


def _count_records(path: Path) -> int:
    if path.suffix == ".jsonl":
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    data = json.loads(path.read_bytes())
    return len(data) if isinstance(data, list) else 1


def _marker(folder: Path) -> dict[str, Any] | None:
    """What `fetch_dataset` recorded when it installed `folder` (None: not installed by it, or unreadable)."""
    try:
        recorded = json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def installed_datasets(explicit: Path | None = None) -> list[InstalledDataset]:
    """Each dataset: where it is read from, how it got there, its record counts."""
    manifest = load_manifest()
    shown = []
    for name in DATASET_NAMES:
        folder = data_dir_for(name, explicit) / manifest[name].folder
        recorded = _marker(folder)
        if recorded is not None:
            # fetched, perhaps with another manifest (a mirror of other versions): its own record is the truth
            sizes: dict[str, int] = recorded.get("bytes", {})
            records: dict[str, int] = recorded.get("records", {})
            verified = all((folder / p).is_file() and (folder / p).stat().st_size == n for p, n in sizes.items())
            shown.append(
                InstalledDataset(
                    name=name, location=folder, how="fetched", records=records, verified=verified and bool(sizes)
                )
            )
            continue
        data_files = [f for f in manifest[name].files if f.records is not None]
        present = [f for f in data_files if (folder / f.path).is_file()]
        if not present:
            shown.append(InstalledDataset(name=name, location=None, how="missing", records={}, verified=False))
            continue
        complete = len(present) == len(data_files) and all((folder / f.path).stat().st_size == f.bytes for f in present)
        shown.append(
            InstalledDataset(
                name=name,
                location=folder,
                how="found",
                verified=complete,
                records={f.path: _count_records(folder / f.path) for f in present},
            )
        )
    return shown


ProgressHook = Callable[[str, int, int], None]
"""(file path, bytes so far, bytes in all) after each chunk."""


def _source(entry: DatasetFile, dataset: Dataset, mirror: str | None) -> str:
    if mirror is None:
        return entry.url
    return f"{mirror.rstrip('/')}/{dataset.folder}/{entry.path}"


def _local_path(source: str) -> Path | None:
    parsed = urlparse(source)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme in ("http", "https"):
        return None
    return Path(source)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(source: str, part: Path, total: int, progress: ProgressHook, label: str) -> None:
    """Append `source` to `part` (continuing a partial file with a Range request where the server allows it)."""
    local = _local_path(source)
    if local is not None:
        if not local.is_file():
            raise FetchError(f"{label}: {local} does not exist (the mirror must have the data folder's layout)")
        shutil.copyfile(local, part)
        progress(label, part.stat().st_size, total)
        return
    import httpx

    have = part.stat().st_size if part.exists() else 0
    # identity: a byte range of a compressed transfer is not a range of the file
    headers = {"Accept-Encoding": "identity"} | ({"Range": f"bytes={have}-"} if 0 < have < total else {})
    host = urlparse(source).netloc
    try:
        with httpx.stream("GET", source, headers=headers, follow_redirects=True, timeout=httpx.Timeout(30.0)) as rsp:
            if rsp.status_code == 416 and have:
                part.unlink()  # the partial file is not a prefix the server recognises: start again
                return _download(source, part, total, progress, label)
            if rsp.status_code not in (200, 206):
                raise FetchError(f"{label}: {source} answered HTTP {rsp.status_code}")
            kind = rsp.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "text/html" and not label.endswith((".html", ".htm")):
                # a mirror's index page or a proxy's login page: no download of it is ever the data file
                raise FetchError(
                    f"{label}: {source} answered an HTML page, not the data file (is --mirror the data folder's "
                    "root, with its layout?)"
                )
            mode = "ab" if rsp.status_code == 206 else "wb"
            done = have if mode == "ab" else 0
            with part.open(mode) as fh:
                for chunk in rsp.iter_raw():
                    fh.write(chunk)
                    done += len(chunk)
                    progress(label, done, total)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise FetchError(
            f"cannot reach {host} ({exc}); offline? `--mirror URL` fetches the same files from a local copy or proxy"
        ) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as exc:
        got = part.stat().st_size if part.exists() else 0
        raise FetchError(
            f"{label}: the download was cut short at {got:,} of {total:,} bytes ({exc}); run the same command again "
            "to resume it"
        ) from exc
    return None


def _fetch_file(entry: DatasetFile, source: str, staging: Path, progress: ProgressHook) -> None:
    final = staging / entry.path
    if final.is_file() and final.stat().st_size == entry.bytes and _sha256(final) == entry.sha256:
        progress(entry.path, entry.bytes, entry.bytes)
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    _download(source, part, entry.bytes, progress, entry.path)
    size = part.stat().st_size
    if size < entry.bytes:
        # The server ended its answer normally with too few bytes (a cut connection raises in _download): asking
        # again gets the same, so nothing is kept to resume.
        part.unlink()
        raise FetchError(
            f"{entry.path}: {source} sent a file of {size:,} bytes where {entry.bytes:,} are expected (not this "
            "file: check that the mirror holds this release's data); nothing was installed"
        )
    got = _sha256(part)
    if size != entry.bytes or got != entry.sha256:
        part.unlink()
        raise FetchError(
            f"{entry.path}: checksum mismatch from {source}: expected sha256 {entry.sha256} ({entry.bytes:,} bytes), "
            f"got {got} ({size:,} bytes); nothing was installed"
        )
    os.replace(part, final)


def _is_installed(folder: Path, dataset: Dataset) -> bool:
    recorded = _marker(folder)
    if recorded is None:
        return False
    expected = {f.path: f.sha256 for f in dataset.files}
    return bool(recorded.get("files") == expected) and all(
        (folder / f.path).is_file() and (folder / f.path).stat().st_size == f.bytes for f in dataset.files
    )


def fetch_dataset(
    name: DatasetName,
    *,
    root: Path,
    mirror: str | None = None,
    manifest: dict[DatasetName, Dataset] | None = None,
    progress: ProgressHook | None = None,
) -> tuple[Path, bool]:
    """Install `name` into `root/FOLDER`; returns (its folder, whether anything was downloaded)."""
    dataset = (manifest or load_manifest())[name]
    target = root / dataset.folder
    if _is_installed(target, dataset):
        return target, False
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{dataset.folder}.staging"
    staging.mkdir(exist_ok=True)
    hook = progress or (lambda _path, _done, _total: None)
    for entry in dataset.files:
        _fetch_file(entry, _source(entry, dataset, mirror), staging, hook)
    record = {
        "dataset": name,
        "source": mirror or "authors",
        "installed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": {f.path: f.sha256 for f in dataset.files},
        "bytes": {f.path: f.bytes for f in dataset.files},
        "records": {f.path: f.records for f in dataset.files if f.records is not None},
    }
    (staging / _MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    _swap_in(staging, target)
    return target, True


def _swap_in(staging: Path, target: Path) -> None:
    """Replace `target` by `staging` so that readers see the old folder or the new one, never a mix."""
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(old)
