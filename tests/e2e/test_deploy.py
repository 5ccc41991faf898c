"""The deploy docs' nginx server blocks, run as written: Debian's nginx in front of a real desk and a real guard on
127.0.0.1, with TLS on a port other than 443. Only what a test machine must change is changed (the listen address,
the certificate's files, the backends' ports), and each change must find what it replaces, so a docs edit that
drops one fails here. Through it: Chromium signs in to the desk (its Origin carries the port), and a streamed
answer comes through the guard chunk by chunk, not all at once."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.test_readme import doc_blocks
from tests.support.desk import KEYS, api_keys, free_port, served
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import ROOT, cli_env, op

pytestmark = pytest.mark.slow  # starts nginx, servers and a browser

NAMES = ("desk.example.com", "guard.example.com")
_ASK = {
    "model": "m",
    "stream": True,
    "messages": [{"role": "user", "content": "?"}],
    "sources": {"doc1": "Paris is the capital of France.", "doc2": "The Seine flows through Paris."},
}


def _block(page: str, name: str) -> str:
    [block] = [b for b in doc_blocks(ROOT / "docs" / page) if b.marker == f"nginx {name}"]
    return block.body


def _adapted(body: str, *, port: int, backend: int, docs_backend: int, cert: Path, key: Path) -> str:
    """The block with a test machine's listen address, certificate files and backend port."""
    changes = [
        (r"listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
        (r"ssl_certificate /etc/ssl/\S+\.crt;", f"ssl_certificate {cert};"),
        (r"ssl_certificate_key /etc/ssl/\S+\.key;", f"ssl_certificate_key {key};"),
        (rf"http://127\.0\.0\.1:{docs_backend}", f"http://127.0.0.1:{backend}"),
    ]
    for pattern, replacement in changes:
        body, found = re.subn(pattern, replacement, body)
        assert found, f"the docs' block no longer has {pattern!r}"
    return body


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    names = ",".join(f"DNS:{n}" for n in NAMES)
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={NAMES[0]}"),
            *("-addext", f"subjectAltName={names}", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None:
        if os.environ.get("DEBATE_REQUIRE_NGINX"):
            raise FileNotFoundError("nginx is not installed (Debian: apt-get install nginx)")
        pytest.skip("no nginx here; CI installs Debian's nginx")
    return found


@contextmanager
def _nginx(folder: Path, servers: list[str]) -> Iterator[None]:
    """nginx with these server blocks, in the foreground, its files in `folder`; after `nginx -t` passes."""
    binary = _nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (folder / sub).mkdir(exist_ok=True)
    user = "user root;\n" if os.geteuid() == 0 else ""
    temps = "".join(
        f"    {kind}_temp_path {folder / kind.split('_')[0]};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    temps = temps.replace(str(folder / "client"), str(folder / "body"))
    conf = folder / "nginx.conf"
    conf.write_text(
        f"{user}daemon off;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log warn;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n    access_log off;\n{temps}    limit_conn_zone $binary_remote_addr zone=perip:10m;\n"
        + "\n".join(servers)
        + "\n}\n"
    )
    checked = subprocess.run([binary, "-t", "-p", str(folder), "-c", str(conf)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([binary, "-p", str(folder), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        yield
    finally:
        process.terminate()
        process.wait(10)


def test_the_desk_behind_the_docs_nginx_signs_in_a_browser_on_another_port(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("DEBATE_REQUIRE_BROWSER"):
            raise FileNotFoundError("Chromium is not installed (Debian: apt-get install chromium)")
        pytest.skip("no Chromium here; CI installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    from tests.desk.test_desk_browser import CHROMIUM_ARGS

    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in api_keys()))
    extra = ("--api-keys-file", str(keys), "--allowed-host", NAMES[0], "--trusted-proxy", "127.0.0.1")
    port = free_port()
    with served(tmp_path, *extra) as (url, _log):
        block = _adapted(
            _block("desk.md", "desk"),
            port=port,
            backend=int(url.rsplit(":", 1)[1]),
            docs_backend=8000,
            cert=certificate[0],
            key=certificate[1],
        )
        with _nginx(tmp_path / "nginx", [block]), sync_playwright() as p:
            args = [*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {NAMES[0]} 127.0.0.1"]
            browser = p.chromium.launch(executable_path=chromium, args=args, headless=True)
            context = browser.new_context(ignore_https_errors=True)
            page = context.new_page()
            page.goto(f"https://{NAMES[0]}:{port}/login")
            page.fill("input[name=key]", KEYS["alice"][1])
            page.click("button[type=submit]")
            page.wait_for_load_state()
            assert page.url == f"https://{NAMES[0]}:{port}/", page.content()[:500]
            assert "Sign out" in page.content()
            [session] = [c for c in context.cookies() if c["name"] == "desk_session"]
            assert session["secure"] and session["httpOnly"]
            browser.close()


def test_a_stream_comes_through_the_docs_nginx_chunk_by_chunk(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    from markov_debate.guard.settings import GuardSettings
    from tests.guard.conftest import GuardServer, judge_config

    answer = "Paris is the capital of France [doc1]. The Seine flows through Paris [doc2]." * 2
    port = free_port()
    with (
        FakeOpenAI(responder=lambda body: Reply(content=answer, stream_gap_s=0.1)) as upstream,
        FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))}) as judge,
    ):
        settings = GuardSettings(
            upstream=upstream.base_url,
            db_url=f"sqlite:///{tmp_path}/g.sqlite",
            verifier=judge_config(judge.base_url),
            stream="pass",
            allowed_hosts=("127.0.0.1", NAMES[1]),  # keyless behind the proxy: its public name (--allowed-host)
        )
        with GuardServer(settings) as guard:
            # the guard asks proxies not to buffer its streams (nginx reads the header and does not pass it on)
            direct = httpx.post(guard.base_url + "/chat/completions", json=_ASK, timeout=60)
            assert direct.headers["x-accel-buffering"] == "no"
            block = _adapted(
                _block("guard.md", "guard"),
                port=port,
                backend=int(guard.base_url.split(":")[2].split("/")[0]),
                docs_backend=8100,
                cert=certificate[0],
                key=certificate[1],
            )
            with _nginx(tmp_path / "nginx", [block]):
                body = _ASK
                arrivals: list[float] = []
                with httpx.Client(verify=False, timeout=60) as client:
                    started = time.monotonic()
                    url = f"https://127.0.0.1:{port}/v1/chat/completions"
                    with client.stream("POST", url, json=body, headers={"Host": f"{NAMES[1]}:{port}"}) as response:
                        assert response.status_code == 200, response.read()
                        for line in response.iter_lines():
                            if line.startswith("data: ") and '"content"' in line:
                                arrivals.append(time.monotonic() - started)
    # 23 chunks 0.1 s apart: the first arrives long before the last (buffered, they would all come at the end)
    assert len(arrivals) > 10 and arrivals[-1] - arrivals[0] > 1.0, arrivals


def _unit(page: str, name: str) -> tuple[list[str], dict[str, str]]:
    """A docs unit's ExecStart (its continuation lines joined, split as systemd splits it) and its other keys."""
    [block] = [b for b in doc_blocks(ROOT / "docs" / page) if b.marker == f"systemd {name}"]
    text = block.body.replace("\\\n", " ")
    lines = [line for line in text.splitlines() if "=" in line and not line.startswith(("[", "#"))]
    keys = dict(line.split("=", 1) for line in lines)
    return shlex.split(keys.pop("ExecStart")), keys


def _machine(argv: list[str], files: dict[str, str], model: str, port: int) -> list[str]:
    """The unit's command with this machine's paths: the installed `debate`, the files in /etc/debate made here,
    the model endpoints scripted, loopback and a free port."""
    assert argv[0] == "/opt/debate/bin/debate", argv[0]
    out = [sys.executable, "-m", "debate.cli"]
    for word in argv[1:]:
        if word.startswith("/etc/debate/"):
            word = files[Path(word).name]
        elif re.fullmatch(r"https?://[\w.]+\.internal(:\d+)?/v1", word):
            word = model
        out.append(word)
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


@pytest.mark.parametrize(("page", "name"), [("desk.md", "desk"), ("desk.md", "worker"), ("guard.md", "guard")])
def test_each_service_unit_starts_and_stops_as_its_unit_says(tmp_path: Path, page: str, name: str) -> None:
    argv, unit = _unit(page, name)
    assert unit["KillSignal"] == "SIGTERM" and unit["Restart"] == "on-failure"
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{k.name}:{k.role}:sha256:{k.sha256}\n" for k in api_keys()))
    db = tmp_path / "db.url"
    db.write_text(f"sqlite:///{tmp_path}/desk.sqlite\n")
    secret = tmp_path / "upstream.key"
    secret.write_text("upstream-secret\n")
    toml = tmp_path / "guard.toml"
    sam = next(k for k in api_keys() if k.name == "sam")
    toml.write_text(f'[keys.sam]\nsha256 = "{sam.sha256}"\n')
    session = tmp_path / "session.secret"
    session.write_text("a-session-secret-of-this-deployment\n")
    files = {
        "keys.txt": str(keys),
        "db.url": str(db),
        "upstream.key": str(secret),
        "guard.toml": str(toml),
        "session.secret": str(session),
    }
    if "--host" in argv:  # behind nginx, as the docs deploy it: a network address would bypass its limits
        assert argv[argv.index("--host") + 1] == "127.0.0.1", argv
    if name == "desk":  # a restart must not sign everyone out
        assert "--session-secret-file" in argv, argv
    port = free_port()
    with FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))}) as model:
        command = _machine(argv, files, model.base_url, port)
        log = tmp_path / "unit.log"
        with log.open("w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env())
        try:
            deadline = time.monotonic() + 60
            while "markov_debate.ready" not in log.read_text() and " on sqlite:///" not in log.read_text():
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            if "--port" in command:
                assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
            process.send_signal(signal.SIGTERM)
            code = process.wait(float(unit["TimeoutStopSec"]))
        finally:
            process.kill()
    # the unit says what a stop by SIGTERM exits with (and systemd counts it a success): that code, no other
    assert code == int(unit["SuccessExitStatus"]) == 143, (code, log.read_text())
    assert "Traceback" not in log.read_text(), log.read_text()


def test_the_alert_rules_name_metrics_the_servers_publish(tmp_path: Path) -> None:
    """Each metric an alert rule names is published by the servers as deployed (the desk with `--jobs 0`, its
    workers apart), and what rate(), increase() and histogram_quantile() take is a counter or a histogram's
    buckets: over a gauge they compute nothing meaningful (issue 73 found two such rules)."""
    from prometheus_client.parser import text_string_to_metric_families

    from markov_debate.guard.settings import GuardSettings
    from tests.guard.conftest import GuardServer, judge_config
    from tests.support.desk import ThreadedDesk, settings_for

    [block] = [b for b in doc_blocks(ROOT / "docs" / "desk.md") if b.marker == "prometheus-rules"]
    rules = [rule for group in yaml.safe_load(block.body)["groups"] for rule in group["rules"]]
    named = {name for rule in rules for name in re.findall(r"\b(?:desk|guard)_[a-z_]+", rule["expr"])}
    counted = {
        name for rule in rules for name in re.findall(r"\b(?:rate|increase)\(\s*((?:desk|guard)_[a-z_]+)", rule["expr"])
    }
    published: set[str] = set()
    growing: set[str] = set()
    with FakeOpenAI(routes={"*": lambda call: Reply(content=op(True))}) as model:
        desk_settings = settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, jobs=0)
        calibrated = desk_settings.verifier.model_copy(
            update={"debate": desk_settings.verifier.debate.model_copy(update={"calibration": _calibration(tmp_path)})}
        )
        guard_settings = GuardSettings(
            upstream=model.base_url, db_url=f"sqlite:///{tmp_path}/g.sqlite", verifier=judge_config(model.base_url)
        )
        with (
            ThreadedDesk(desk_settings.model_copy(update={"verifier": calibrated})) as desk,
            GuardServer(guard_settings) as guard,
        ):
            httpx.get(desk.url + "/v1/health", timeout=10)  # a histogram has samples once it has observed one
            for url in (desk.url + "/metrics", guard.base_url.removesuffix("/v1") + "/metrics"):
                for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
                    published |= {sample.name for sample in family.samples} | {family.name}
                    if family.type in ("counter", "histogram"):
                        growing |= {s.name for s in family.samples if s.name.endswith(("_total", "_bucket"))}
    assert named and named <= published, sorted(named - published)
    assert counted and counted <= growing, f"rate()/increase() over a gauge: {sorted(counted - growing)}"


def _calibration(folder: Path) -> str:
    from tests.support.calibration import calibration, save_calibration

    return save_calibration(folder, calibration(model="fake-model"))
