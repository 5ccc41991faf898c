"""`debate data fetch|list|path`: the benchmark files, by command (added to `debate` by entry point)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from debate.cli import add_command_group, examples, output_folder
from debate.cli.conventions import Subcommands
from experiments.datasets import (
    DATASET_NAMES,
    DatasetName,
    data_dir_for,
    fetch_dataset,
    installed_datasets,
    load_manifest,
    user_data_root,
)

__all__ = ["register"]

_out = Console()
_err = Console(stderr=True)


def register(sub: Subcommands) -> None:
    """Add `data` (fetch, list, path) to the `debate` subcommands."""
    data_sub = add_command_group(
        sub,
        "data",
        dest="data_command",
        metavar="ACTION",
        help="benchmark data: fetch it from its authors, list what is installed, print a path",
        description="HaluEval, FactPrompts and the RefChecker annotations, downloaded from their authors' "
        "repositories at pinned commits, checked against recorded sha256 checksums and sizes, and installed "
        "atomically in the user data directory. Experiments read --data-dir / DEBATE_DATA_DIR first, then the "
        "user data directory, then ../shared/data.",
    )
    _register_fetch(data_sub)
    listing = data_sub.add_parser(
        "list",
        help="what is installed where, with record counts",
        epilog=examples("debate data list", "debate data list --data-dir ./data"),
    )
    listing.add_argument(
        "--data-dir", type=Path, default=None, help="look only here (default: the order experiments read in)"
    )
    listing.set_defaults(handler=_list)
    path = data_sub.add_parser(
        "path",
        help="print the folder a dataset is read from",
        epilog=examples("debate data path halueval", "ls $(debate data path refchecker)"),
    )
    path.add_argument("name", choices=DATASET_NAMES, help="the dataset")
    path.add_argument("--data-dir", type=Path, default=None, help="look only here (default: the usual order)")
    path.set_defaults(handler=_path)


def _register_fetch(data_sub: Subcommands) -> None:
    fetch = data_sub.add_parser(
        "fetch",
        help="download and install datasets (a re-run resumes and skips what is installed)",
        epilog=examples(
            "debate data fetch all                          # ~67 MB: HaluEval, FactPrompts, RefChecker",
            "debate data fetch halueval --dir ./data",
            "debate data fetch all --mirror http://proxy.internal/markov-debate-data",
            "debate data fetch factprompts --mirror /mnt/copy/data    # a folder with the data layout",
        ),
    )
    fetch.add_argument(
        "names", nargs="+", choices=[*DATASET_NAMES, "all"], metavar="NAME", help=f"{', '.join(DATASET_NAMES)} or all"
    )
    fetch.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="install here instead (default: DEBATE_DATA_DIR, else the user data directory)",
    )
    fetch.add_argument(
        "--mirror",
        metavar="URL",
        default=os.environ.get("DEBATE_DATA_MIRROR") or None,
        help="fetch the same files from this base URL or folder, laid out as the data folder "
        "(MIRROR/halueval/qa_data.jsonl) (default: DEBATE_DATA_MIRROR, else the authors' repositories)",
    )
    fetch.add_argument(
        "--manifest",
        type=Path,
        default=os.environ.get("DEBATE_DATA_MANIFEST") or None,
        metavar="FILE",
        help="checksums and sizes to verify against, for a mirror of other versions (default: "
        "DEBATE_DATA_MANIFEST, else the recorded ones)",
    )
    fetch.set_defaults(handler=_fetch)


def _names(given: list[str]) -> list[DatasetName]:
    return list(DATASET_NAMES) if "all" in given else [n for n in DATASET_NAMES if n in given]


def _fetch(args: argparse.Namespace) -> int:
    root = args.dir or (Path(os.environ["DEBATE_DATA_DIR"]) if os.environ.get("DEBATE_DATA_DIR") else user_data_root())
    output_folder(root, "--dir" if args.dir else "DEBATE_DATA_DIR")
    manifest = load_manifest(args.manifest)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=_err,
        disable=not _err.is_terminal,
    )
    with progress:
        for name in _names(args.names):
            dataset = manifest[name]
            bar: TaskID = progress.add_task(name, total=dataset.total_bytes)
            finished: dict[str, int] = {}

            def advance(
                path: str, done: int, _total: int, bar: TaskID = bar, seen: dict[str, int] = finished, label: str = name
            ) -> None:
                seen[path] = done
                progress.update(bar, completed=sum(seen.values()), description=f"{label}: {path}")

            folder, downloaded = fetch_dataset(name, root=root, mirror=args.mirror, manifest=manifest, progress=advance)
            progress.update(bar, completed=dataset.total_bytes, description=name)
            what = "installed" if downloaded else "already installed"
            files = f"{len(dataset.files)} file{'s' if len(dataset.files) != 1 else ''}"
            _err.print(
                f"{name}: {what} in {folder} ({files}, {dataset.total_bytes:,} bytes)", highlight=False, soft_wrap=True
            )
    return 0


def _list(args: argparse.Namespace) -> int:
    table = Table(title="benchmark data", title_justify="left")
    for column in ("dataset", "status", "location", "records"):
        table.add_column(column)
    for entry in installed_datasets(args.data_dir):
        status = entry.how if entry.verified or entry.how == "missing" else f"{entry.how}, incomplete"
        records = (
            f"{len(entry.records)} files, {sum(entry.records.values()):,} records"
            if len(entry.records) > 4
            else ", ".join(f"{Path(p).name} {n:,}" for p, n in entry.records.items()) or "—"
        )
        where = str(entry.location) if entry.location else f"run `debate data fetch {entry.name}`"
        table.add_row(entry.name, status, where, records)
    _out.print(table, soft_wrap=True)
    return 0


def _path(args: argparse.Namespace) -> int:
    name: DatasetName = args.name
    _out.print(str(data_dir_for(name, args.data_dir) / load_manifest()[name].folder), highlight=False, soft_wrap=True)
    return 0
