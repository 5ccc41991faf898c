"""Every code block of README.md and of the docs site (docs/, in mkdocs.yml's nav order) runs, so neither can drift
from the code.

The README's blocks run in README order in one working directory, the docs pages' in another (so a file an earlier
block writes is there for later blocks), with `debate` against a scripted OpenAI-compatible endpoint on 127.0.0.1:
OPENAI_BASE_URL points at it and every `http(s)://.../v1` in a block is replaced by its URL (the README's examples
name OpenAI, vLLM and Ollama). The endpoint routes by the X-Debate-Purpose header each request declares; its agents
judge a claim false when it carries one of the README's wrong answers ("1925", "Marlowe"). What each kind of block gets:

- `bash`: run with `bash -e -o pipefail`; it must exit 0 (blocks that gate on exit 3 say so themselves).
- `python`: run as a script; a block defining `test_*` functions is run by plain pytest with no endpoint configured
  (as a user copies it), so its `debate_script` marker answers; it must pass.
- `<!-- readme: setup -->`: command 2 must be the line CI runs (tests/test_quality.py); command 1's `debate`
  part is run like any shell block.
- `<!-- readme: file NAME -->`: written to NAME for later blocks. Blocks run in an empty folder, so every file an
  example reads must be made by a block the reader sees.
- Benchmark data comes from the README's own `debate data fetch`, with DEBATE_DATA_MIRROR and DEBATE_DATA_MANIFEST
  pointing at the fixtures in tests/fixtures/data (no ../shared, no network). Every block runs even after one
  fails; the test reports them all.
- `<!-- readme: serve -->`: `debate serve` is started on a free port; the next bash block (the curl tour) runs
  against it, `localhost:8000` rewritten.
- `<!-- readme: guard -->`: `debate guard` is started on a free port in front of the docs' endpoint (which answers
  its forwarded requests as an upstream) and judged by it; later Python blocks' `127.0.0.1:8100` is rewritten to it.
- `<!-- readme: phoenix -->`: a real Phoenix server is started (once) on a free port and the block's
  `127.0.0.1:6006` is rewritten to it.
- `<!-- readme: report-schema -->`: every key it shows is a field of the Report models.
- `<!-- readme: layout -->`: every path it lists exists.
- `<!-- readme: nginx NAME -->`, `<!-- readme: systemd NAME -->`, `<!-- readme: prometheus-rules -->`: the deploy
  examples, run as written by tests/e2e/test_deploy.py (a real nginx in front of real servers, each unit's
  ExecStart started and stopped, the rules' metrics scraped); skipped here.
- other `text` blocks are output excerpts of the block before them (not code).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Generator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import ROOT, cli_env, op
from tests.support.phoenix import Phoenix, free_port, start_phoenix

pytestmark = pytest.mark.slow  # starts processes

WRONG = ("1925", "Marlowe")
FIXTURE_DATA = ROOT / "tests" / "fixtures" / "data"
_BLOCK = re.compile(r"(?:<!-- readme: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


@dataclass
class Block:
    line: int
    lang: str
    marker: str
    body: str
    path: str = "README.md"


def doc_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    where = path.relative_to(ROOT)
    return [
        Block(text.count("\n", 0, m.start()) + 1, m["lang"], (m["marker"] or "").strip(), m["body"], str(where))
        for m in _BLOCK.finditer(text)
    ]


def readme_blocks() -> list[Block]:
    return doc_blocks(ROOT / "README.md")


def docs_pages() -> list[Path]:
    """The docs pages in the site's nav order (a page's blocks may use a file an earlier page made)."""
    nav = re.findall(r'^\s*- (?:"[^"\n]*": |[^:"\n]+: )?([\w-]+\.md)\s*$', (ROOT / "mkdocs.yml").read_text(), re.M)
    return [ROOT / "docs" / name for name in nav]


def docs_blocks() -> list[Block]:
    return [block for page in docs_pages() for block in doc_blocks(page)]


def _respond(unknown: list[str]) -> Any:
    def respond(body: dict[str, Any], purpose: str, guarded: bool = False) -> Reply:
        user = " ".join(str(m.get("content", "")) for m in body["messages"] if m.get("role") == "user")
        kind = purpose.split(":", 1)[0]
        if kind == "debate":
            wrong = any(w in user for w in WRONG)
            why = "the evidence says otherwise" if wrong else "supported"
            return Reply(content=op(not wrong, 4 if wrong else 0, why))
        if kind == "extract":
            return Reply(content=json.dumps({"claims": ["The Eiffel Tower is in Paris."]}))
        if kind == "subjective_filter":
            return Reply(content="It was finished in 1889.")
        if kind == "queries":
            return Reply(content=json.dumps({"queries": ["Eiffel Tower location", "Eiffel Tower city"]}))
        if kind == "judge":
            return Reply(content="No")
        if kind == "" and guarded:
            # the guard's upstream: a RAG answer citing the source the docs' request sends
            return Reply(content="The Eiffel Tower is in Paris [eiffel].")
        unknown.append(purpose)
        return Reply(status=599, error_message=f"the README's endpoint has no reply for purpose {purpose!r}")

    return respond


class PurposeServer(FakeOpenAI):
    """FakeOpenAI answering by the request's declared purpose (its X-Debate-Purpose header, recorded in `headers`
    under the same lock, just before the responder is called)."""

    def __init__(self) -> None:
        self.unknown: list[str] = []
        respond = _respond(self.unknown)
        super().__init__(
            responder=lambda body: respond(
                body,
                self.headers[-1].get("x-debate-purpose", ""),
                self.headers[-1].get("x-request-id", "").startswith("guard-"),
            )
        )


def _run(cmd: list[str], work: Path, env: dict[str, str], block: Block, timeout: float = 600) -> str:
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _rewrite(body: str, base_url: str) -> str:
    # an API root: a host, an optional port and path prefix (Azure's /openai), then /v1
    return re.sub(r"https?://[A-Za-z0-9.\-]+(?::\d+)?(?:/[A-Za-z0-9_\-]+)*?/v1\b", base_url, body)


def test_every_readme_block_runs(tmp_path: Path) -> None:
    """Blocks run in an empty folder: every file an example reads is made by a block the reader sees."""
    blocks = readme_blocks()
    assert len(blocks) >= 4
    server = _run_all(blocks, tmp_path)
    assert len(server.requests) > 5  # the blocks really ran the engine


def test_every_docs_block_runs(tmp_path: Path) -> None:
    """The docs pages' blocks, in nav order, in one empty folder. The benchmark data comes from the docs' own
    `debate data fetch`, served by a local mirror of the test fixtures."""
    blocks = docs_blocks()
    assert len(blocks) >= 45
    server = _run_all(blocks, tmp_path)
    assert len(server.requests) > 100  # the blocks really ran the engine


def _run_all(blocks: list[Block], tmp_path: Path) -> PurposeServer:
    assert shutil.which("debate"), "the debate command is not installed (pip install -e .)"
    work = tmp_path / "work"
    work.mkdir()
    server = PurposeServer()
    failures: list[str] = []
    with server:
        env = cli_env() | {
            "OPENAI_BASE_URL": server.base_url,
            "COLUMNS": "160",
            "XDG_DATA_HOME": str(tmp_path / "xdg"),
            "DEBATE_DATA_MIRROR": str(FIXTURE_DATA),
            "DEBATE_DATA_MANIFEST": str(FIXTURE_DATA / "manifest.json"),
        }
        env.pop("DEBATE_DATA_DIR", None)
        started: list[subprocess.Popen[bytes]] = []
        addresses: dict[str, str] = {}
        phoenix = _LazyPhoenix(tmp_path / "phoenix")
        try:
            for block in blocks:
                try:
                    if block.marker == "phoenix":
                        block = replace(block, body=block.body.replace("127.0.0.1:6006", phoenix.address()))
                    process = _run_block(block, work, env, server, addresses, tmp_path)
                except (AssertionError, subprocess.TimeoutExpired, OSError) as exc:
                    failures.append(f"{block.path} line {block.line} ({block.lang or 'text'}): {exc}")
                    continue
                if process is not None:
                    started.append(process)
        finally:
            phoenix.stop()
            for process in started:
                process.terminate()
                process.wait(timeout=60)
    assert not failures, f"{len(failures)} block(s) failed:\n\n" + "\n\n".join(failures)
    assert server.unknown == [], f"requests the endpoint could not answer: {sorted(set(server.unknown))}"
    return server


class _LazyPhoenix:
    """A real Phoenix, started the first time a block needs it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.running: Generator[Phoenix, None, None] | None = None
        self.url = ""

    def address(self) -> str:
        if self.running is None:
            self.folder.mkdir(exist_ok=True)
            self.running = start_phoenix(self.folder)
            self.url = next(self.running).url
        return self.url.removeprefix("http://")

    def stop(self) -> None:
        if self.running is not None:
            self.running.close()


def _run_block(
    block: Block, work: Path, env: dict[str, str], server: PurposeServer, addresses: dict[str, str], tmp_path: Path
) -> subprocess.Popen[bytes] | None:
    """Run one block; a serve or guard block starts its server (its address goes in `addresses`) and returns it."""
    body = _rewrite(block.body, server.base_url)
    if block.marker == "setup":
        if "debate verify" in body:
            _run(["bash", "-e", "-c", body.strip().rsplit("&& ", 1)[1]], work, env, block)
        return None
    if block.marker.startswith("file "):
        (work / block.marker.split(" ", 1)[1]).write_text(block.body)
        return None
    if block.marker in ("serve", "guard"):
        port = free_port()
        command = body.strip().rsplit("&& ", 1)[-1].split()
        argv = [*command, "--port", str(port), "--db", f"sqlite:///{tmp_path}/desk.db"]
        process = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(f"http://127.0.0.1:{port}/{'v1/health' if block.marker == 'serve' else 'healthz'}")
        addresses[block.marker] = f"127.0.0.1:{port}"
        return process
    if block.marker.startswith(("nginx ", "systemd ")) or block.marker == "prometheus-rules":
        return None  # tests/e2e/test_deploy.py runs it
    if block.marker == "report-schema":
        _check_report_keys(block.body)
    elif block.marker == "layout":
        _check_layout(block.body)
    elif block.marker == "output":
        # an output the page shows as its command's: every line of it is a line of what the command printed
        printed = {line.rstrip() for line in addresses.get(LAST_OUTPUT, "").splitlines()}
        missing = [line for line in block.body.splitlines() if line.strip() and line.rstrip() not in printed]
        assert not missing, f"the page shows lines its command does not print: {missing}"
    elif block.lang == "bash":
        if "curl " in body:
            assert "serve" in addresses, "a curl block before `debate serve`"
            body = body.replace("localhost:8000", addresses["serve"])
        out = _run(["bash", "-e", "-o", "pipefail", "-c", body], work, env, block)
        assert "Traceback" not in out and "Internal Server Error" not in out, out
        addresses[LAST_OUTPUT] = out
    elif block.lang == "python" and "def test_" in body:
        # as a user runs it: plain pytest, nothing configured, so the test's debate_script marker answers
        script = work / f"test_readme_block_{_slug(block)}.py"
        script.write_text(body)
        offline = {k: v for k, v in env.items() if k != "OPENAI_BASE_URL"}
        _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name], work, offline, block)
    elif block.lang == "python":
        if "127.0.0.1:8100" in body:
            assert "guard" in addresses, "a block calling the guard before `debate guard`"
            body = body.replace("127.0.0.1:8100", addresses["guard"])
        script = work / f"readme_block_{_slug(block)}.py"
        script.write_text(body)
        _run([sys.executable, script.name], work, env, block)
    elif block.lang in ("toml", "json"):
        raise AssertionError(f"a {block.lang} block with no readme marker")
    # any other block (text) is an output excerpt
    return None


LAST_OUTPUT = "last output"
"""Where _run_block keeps the last bash block's output, for an `output` block to be checked against."""


def _slug(block: Block) -> str:
    return re.sub(r"\W", "_", f"{Path(block.path).stem}_{block.line}")


def _wait_for(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _check_report_keys(body: str) -> None:
    from debate import types

    fields = {
        name
        for model in vars(types).values()
        if isinstance(model, type) and hasattr(model, "model_fields")
        for name in model.model_fields
    }
    # Keys of mappings (the prompt hashes by role) are values, not fields.
    shown = set(re.findall(r'"([a-z_]+)":', body)) - {"initial", "trust", "skeptic", "leader"}
    assert shown and shown <= fields, f"keys the README shows that no model has: {sorted(shown - fields)}"


def _check_layout(body: str) -> None:
    missing = []
    parent = ""
    for line in body.splitlines():
        # Entries sit at column 0 (top level) or 2 (inside it); deeper lines continue a description.
        match = re.match(r"^( {0,2})([A-Za-z_.]+/?)\s", line + " ")
        if not match:
            continue
        name = match[2]
        if not match[1]:
            parent = name if name.endswith("/") else ""
            path = ROOT / name
        else:
            path = ROOT / parent / name
        if name.endswith((".py", "/")) and not path.exists():
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"README layout names paths that do not exist: {missing}"


def test_block_parser_sees_markers() -> None:
    kinds = {b.marker for b in readme_blocks() + docs_blocks()}
    assert {"setup", "serve", "report-schema", "layout"} <= kinds
    assert any(k.startswith("file ") for k in kinds)
    assert os.path.basename(__file__) == "test_readme.py"
