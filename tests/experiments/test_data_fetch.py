"""`debate data`: fetching the benchmark files over real HTTP from a 127.0.0.1 server (never the internet), with
checksum mismatches, cut-short downloads, resumed re-runs, mirrors, and an unreachable host."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from experiments.datasets import (
    Dataset,
    DatasetName,
    FetchError,
    data_dir_for,
    fetch_dataset,
    installed_datasets,
    load_manifest,
    user_data_root,
)
from tests.support.helpers import ROOT, cli_env

pytestmark = pytest.mark.slow  # starts processes

FIXTURES = ROOT / "tests" / "fixtures" / "data"


class DataServer:
    """Serves a folder over HTTP with Range support; `corrupt` and `cut` (path -> bytes sent) inject faults."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.corrupt: set[str] = set()
        self.cut: dict[str, int] = {}
        self.html: set[str] = set()
        """Paths answered with an HTML page (a proxy's sign-in page, a directory index), 200 and whole."""
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rel = self.path.lstrip("/")
                server.requests.append((rel, self.headers.get("Range")))
                path = server.folder / rel
                if not path.is_file():
                    self.send_error(404)
                    return
                body = path.read_bytes()
                if rel in server.html:
                    page = b"<!doctype html><title>Sign in</title><p>Please sign in to the proxy to continue.</p>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if rel in server.corrupt:
                    body = body.replace(b"a", b"b", 1)
                start = 0
                if self.headers.get("Range"):
                    start = int(self.headers["Range"].split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                limit = server.cut.pop(rel, None)
                self.wfile.write(body[start:] if limit is None else body[start:limit])
                if limit is not None:
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> DataServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[DataServer]:
    with DataServer(FIXTURES) as srv:
        yield srv


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh user data directory (platformdirs reads XDG_DATA_HOME) and no DEBATE_DATA_DIR."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DEBATE_DATA_DIR", raising=False)
    return tmp_path / "xdg" / "markov-debate" / "data"


def _fixture_manifest(server: DataServer) -> dict[DatasetName, Dataset]:
    """The fixture manifest with each file's URL pointing at `server` (as the authors' URLs would)."""
    manifest = load_manifest(FIXTURES / "manifest.json")
    return {
        name: ds.model_copy(
            update={
                "files": tuple(
                    f.model_copy(update={"url": f"{server.base_url}/{ds.folder}/{f.path}"}) for f in ds.files
                )
            }
        )
        for name, ds in manifest.items()
    }


def test_fixture_manifest_matches_its_files() -> None:
    for dataset in load_manifest(FIXTURES / "manifest.json").values():
        for entry in dataset.files:
            data = (FIXTURES / dataset.folder / entry.path).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (entry.bytes, entry.sha256), entry.path


def test_recorded_manifest_names_every_file_the_experiments_read() -> None:
    manifest = load_manifest()
    paths = {(ds.folder, f.path) for ds in manifest.values() for f in ds.files}
    assert {("halueval", f"{t}_data.jsonl") for t in ("qa", "dialogue", "summarization", "general")} <= paths
    assert ("factool", "knowledge_qa.jsonl") in paths
    assert sum(1 for folder, p in paths if folder == "refchecker" and p.startswith("human_annotations_v1/")) == 21
    for dataset in manifest.values():
        for entry in dataset.files:
            assert entry.url.startswith("https://raw.githubusercontent.com/"), entry.url
            # pinned to a commit, so the recorded checksum stays the authors' file
            assert len(entry.url.split("/")[5]) == 40, entry.url
    assert manifest["halueval"].files[0].records == 10_000


def test_fetch_installs_verified_files_and_a_rerun_downloads_nothing(server: DataServer, user_home: Path) -> None:
    manifest = _fixture_manifest(server)
    seen: list[tuple[str, int, int]] = []
    folder, downloaded = fetch_dataset(
        "halueval", root=user_data_root(), manifest=manifest, progress=lambda p, d, t: seen.append((p, d, t))
    )
    assert downloaded and folder == user_home / "halueval"
    for entry in manifest["halueval"].files:
        assert (folder / entry.path).read_bytes() == (FIXTURES / "halueval" / entry.path).read_bytes()
    assert {p for p, _, _ in seen} == {f.path for f in manifest["halueval"].files}
    assert not list(user_home.glob(".*staging"))
    marker = json.loads((folder / ".installed.json").read_text())
    assert marker["files"] == {f.path: f.sha256 for f in manifest["halueval"].files}

    before = len(server.requests)
    assert fetch_dataset("halueval", root=user_data_root(), manifest=manifest) == (folder, False)
    assert len(server.requests) == before
    # the user data directory now wins over ../shared/data for this dataset
    assert data_dir_for("halueval") == user_home


def test_checksum_mismatch_installs_nothing(server: DataServer, user_home: Path) -> None:
    manifest = _fixture_manifest(server)
    server.corrupt.add("halueval/general_data.jsonl")
    with pytest.raises(FetchError, match=r"general_data.jsonl: checksum mismatch .* expected sha256 [0-9a-f]{64}"):
        fetch_dataset("halueval", root=user_home, manifest=manifest)
    assert not (user_home / "halueval").exists()
    assert not list(user_home.rglob("*.part"))
    # the files that did verify are kept for the next run, which then completes
    server.corrupt.clear()
    before = len(server.requests)
    folder, downloaded = fetch_dataset("halueval", root=user_home, manifest=manifest)
    assert downloaded and (folder / "general_data.jsonl").is_file()
    assert [r for r, _ in server.requests[before:]] == ["halueval/general_data.jsonl"]


def test_cut_short_download_is_resumed_with_a_range_request(server: DataServer, user_home: Path) -> None:
    manifest = _fixture_manifest(server)
    server.cut["halueval/summarization_data.jsonl"] = 20_000
    with pytest.raises(FetchError, match=r"cut short at 20,000 of 50,796 bytes.*run the same command again"):
        fetch_dataset("halueval", root=user_home, manifest=manifest)
    assert not (user_home / "halueval").exists()
    folder, _ = fetch_dataset("halueval", root=user_home, manifest=manifest)
    assert ("halueval/summarization_data.jsonl", "bytes=20000-") in server.requests
    entry = next(f for f in manifest["halueval"].files if f.path == "summarization_data.jsonl")
    assert hashlib.sha256((folder / entry.path).read_bytes()).hexdigest() == entry.sha256


def test_a_mirror_answering_html_is_named_not_cut_short(server: DataServer, user_home: Path) -> None:
    """A proxy's page or a directory index in place of a file: said for what it is, never "cut short, run again"
    (running again gets the same page), and nothing is kept or installed."""
    manifest = _fixture_manifest(server)
    server.html.add("halueval/qa_data.jsonl")
    with pytest.raises(FetchError, match=r"qa_data.jsonl: .* answered an HTML page, not the data file") as found:
        fetch_dataset("halueval", root=user_home, manifest=manifest)
    assert "cut short" not in str(found.value) and not (user_home / "halueval").exists()
    assert not list(user_home.rglob("qa_data.jsonl.part"))


def test_reinstall_replaces_the_old_folder_whole(server: DataServer, user_home: Path) -> None:
    manifest = _fixture_manifest(server)
    old = user_home / "factool"
    old.mkdir(parents=True)
    (old / "stale.txt").write_text("from an older layout")
    folder, downloaded = fetch_dataset("factprompts", root=user_home, manifest=manifest)
    assert downloaded and sorted(p.name for p in folder.iterdir()) == [".installed.json", "knowledge_qa.jsonl"]
    assert sorted(p.name for p in user_home.iterdir()) == ["factool"]


def test_mirror_by_url_and_by_folder(server: DataServer, tmp_path: Path) -> None:
    manifest = load_manifest(FIXTURES / "manifest.json")  # its URLs are the authors': unreachable from tests
    folder, _ = fetch_dataset("refchecker", root=tmp_path / "a", mirror=server.base_url + "/", manifest=manifest)
    assert server.requests == [("refchecker/human_annotations_v1/zero_context/nq_gpt4_answers.json", None)]
    folder2, _ = fetch_dataset("refchecker", root=tmp_path / "b", mirror=str(FIXTURES), manifest=manifest)
    rel = "human_annotations_v1/zero_context/nq_gpt4_answers.json"
    assert (folder / rel).read_bytes() == (folder2 / rel).read_bytes() == (FIXTURES / "refchecker" / rel).read_bytes()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_host_is_a_clear_error(tmp_path: Path) -> None:
    manifest = load_manifest(FIXTURES / "manifest.json")
    with pytest.raises(FetchError, match=r"cannot reach 127\.0\.0\.1:\d+ .*offline\? `--mirror URL`"):
        fetch_dataset("factprompts", root=tmp_path, mirror=f"http://127.0.0.1:{_closed_port()}", manifest=manifest)
    assert not (tmp_path / "factool").exists()


def test_list_shows_where_each_dataset_is_and_its_counts(server: DataServer, user_home: Path) -> None:
    fetch_dataset("factprompts", root=user_home, manifest=_fixture_manifest(server))
    shown = {d.name: d for d in installed_datasets(FIXTURES)}
    assert shown["halueval"].how == "found" and shown["halueval"].records["qa_data.jsonl"] == 40
    # the fixtures are subsets: their sizes are not the recorded ones
    assert not shown["halueval"].verified
    fetched = installed_datasets(user_home)
    assert [(d.name, d.how) for d in fetched] == [
        ("halueval", "missing"),
        ("factprompts", "fetched"),
        ("refchecker", "missing"),
    ]


def _debate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_fetch_list_path_and_offline(server: DataServer, tmp_path: Path) -> None:
    env = cli_env() | {"XDG_DATA_HOME": str(tmp_path / "xdg"), "COLUMNS": "200"}
    env.pop("DEBATE_DATA_DIR", None)
    done = _debate(
        "data", "fetch", "all", "--mirror", server.base_url, "--manifest", str(FIXTURES / "manifest.json"), env=env
    )
    assert done.returncode == 0, done.stderr
    home = tmp_path / "xdg" / "markov-debate" / "data"
    assert f"halueval: installed in {home / 'halueval'} (4 files, " in done.stderr
    listing = _debate("data", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    assert "fetched" in listing.stdout and "qa_data.jsonl 40" in listing.stdout
    assert _debate("data", "path", "factprompts", env=env).stdout.strip() == str(home / "factool")

    offline = _debate(
        "data",
        "fetch",
        "halueval",
        "--dir",
        str(tmp_path / "other"),
        "--mirror",
        f"http://127.0.0.1:{_closed_port()}",
        env=env,
    )
    assert offline.returncode == 1
    assert offline.stderr.count("\n") == 1 and offline.stderr.startswith("debate: error: cannot reach 127.0.0.1:")
    bad = _debate("data", "fetch", "halueval", "--manifest", str(tmp_path / "nope.json"), env=env)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("debate: error: --manifest: cannot read")


def test_eval_without_data_says_how_to_fetch_it(tmp_path: Path) -> None:
    env = cli_env() | {"XDG_DATA_HOME": str(tmp_path / "xdg"), "DEBATE_DATA_DIR": str(tmp_path / "empty")}
    done = subprocess.run(
        [sys.executable, "-m", "debate.cli", "eval", "halueval", "--task", "qa", "--runs-root", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "fetch it with `debate data fetch halueval`" in done.stderr
    assert "run folder" not in done.stderr and not (tmp_path / "runs").exists()
