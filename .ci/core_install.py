"""Run by .ci/run in a venv holding only the core install (`pip install -e .`, no extras): no matplotlib,
scikit-learn, scipy or tabulate is installed; every command's --help and `debate --version` work; `debate verify`
verifies against a model endpoint; and each command whose extra is missing refuses in one line naming the install
command.

    python .ci/core_install.py     # with the venv's python; `debate` is taken from the same venv
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from debate.cli import build_parser, walk

DEBATE = str(Path(sys.executable).with_name("debate"))
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
ENV |= {"NO_COLOR": "1", "COLUMNS": "120"}

# (command line, what the one line must say): commands whose extra this venv does not have, and a bad argument.
REFUSALS = [
    (["serve"], 'debate serve needs the desk extra: pip install "markov-debate[desk]"'),
    (["worker"], 'debate worker needs the desk extra: pip install "markov-debate[desk]"'),
    (["verify", "--question", "Q?", "--answer", "A", "--evidence", "E"], "the embedded model is not installed"),
    (["data", "fetch", "halueval", "--manifest", "no-such-manifest.json"], "--manifest: cannot read"),
    (
        ["eval", "halueval", "--task", "qa", "--n", "2"],
        'debate eval needs the experiments extra: pip install "markov-debate[experiments]"',
    ),
    (
        ["dynamics", "simulate", "--roles", "roles.toml", "--out", "sim"],
        'debate dynamics needs the experiments extra: pip install "markov-debate[experiments]"',
    ),
    (
        ["export", "phoenix", "results.jsonl"],
        'debate export phoenix needs the otel extra: pip install "markov-debate[otel]"',
    ),
    (
        [
            "verify",
            "--answer",
            "A",
            "--model.base-url",
            "http://127.0.0.1:9/v1",
            "--telemetry.endpoint",
            "http://127.0.0.1:9",
        ],
        'tracing to http://127.0.0.1:9/v1/traces needs the otel extra: pip install "markov-debate[otel]"',
    ),
]


def _commands() -> list[list[str]]:
    """Every leaf command as its words (`["eval", "halueval"]`), read from the real parser tree."""
    found = []
    for parser in walk(build_parser([]))[1:]:
        if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            continue
        found.append(parser.prog.split()[1:])
    return found


class _Agreeing(BaseHTTPRequestHandler):
    """A 127.0.0.1 OpenAI-compatible endpoint whose every agent says the claim is factual."""

    def do_GET(self) -> None:  # /v1/models
        self._json({"object": "list", "data": [{"id": "core-check", "object": "model"}]})

    def do_POST(self) -> None:  # /v1/chat/completions
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = {"opinion": "The evidence states it.", "factuality": True, "Error severity": 0}
        message = {"role": "assistant", "content": json.dumps(reply)}
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        self._json(
            {
                "id": "c",
                "object": "chat.completion",
                "model": "core-check",
                "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )

    def _json(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _verify_runs() -> list[str]:
    """`debate verify` works on the core install: against a model endpoint, with the knowledge given as evidence
    (no embedded model, no dense retriever, none of the experiments' libraries)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agreeing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    words = [
        "verify",
        "--model.base-url",
        f"http://127.0.0.1:{server.server_port}/v1",
        "--question",
        "Where is Paris?",
        "--answer",
        "Paris is in France.",
        "--evidence",
        "Paris is the capital of France.",
    ]
    try:
        done = subprocess.run([DEBATE, *words], capture_output=True, text=True, env=ENV, timeout=300)
    finally:
        server.shutdown()
    failures = []
    if done.returncode != 0 or "FACTUAL" not in done.stdout:
        failures.append(f"debate {' '.join(words)}: exit {done.returncode}\n{done.stdout}{done.stderr[-2000:]}")
    tour = subprocess.run([DEBATE, "tour", "--simulated"], capture_output=True, text=True, env=ENV, timeout=300)
    if tour.returncode != 0 or "model: simulated" not in tour.stdout:
        failures.append(f"debate tour --simulated: exit {tour.returncode}\n{tour.stderr[-2000:]}")
    return failures


def main() -> int:
    extras = [
        name
        for name in (
            "llama_cpp",
            "sentence_transformers",
            "fastapi",
            "sqlalchemy",
            "ray",
            "sklearn",
            "scipy",
            "tabulate",
            "matplotlib",
        )
        if importlib.util.find_spec(name) is not None
    ]
    if extras:
        print(f"core_install: this venv has extras installed ({', '.join(extras)}); run it in a core-only venv")
        return 2
    failures = []
    commands = _commands()
    for words in [[], *commands]:
        done = subprocess.run([DEBATE, *words, "--help"], capture_output=True, text=True, env=ENV, timeout=120)
        if done.returncode != 0 or "usage:" not in done.stdout or done.stderr:
            failures.append(f"debate {' '.join(words)} --help: exit {done.returncode}\n{done.stderr[-2000:]}")
    done = subprocess.run([DEBATE, "--version"], capture_output=True, text=True, env=ENV, timeout=120)
    if done.returncode != 0 or not done.stdout.startswith("debate (markov-debate) "):
        failures.append(f"debate --version: exit {done.returncode}: {done.stdout}{done.stderr}")
    for words, expected in REFUSALS:
        done = subprocess.run([DEBATE, *words], capture_output=True, text=True, env=ENV, timeout=120)
        lines = done.stderr.strip().splitlines()
        if done.returncode not in (1, 2) or len(lines) != 1 or expected not in lines[0] or "Traceback" in done.stderr:
            failures.append(
                f"debate {' '.join(words)}: exit {done.returncode}, expected one line with {expected!r}:\n"
                f"{done.stderr[-2000:]}"
            )
    failures += _verify_runs()
    for failure in failures:
        print(f"FAILED {failure}")
    print(
        f"core install: {len(commands) + 2} help/version checks, {len(REFUSALS)} refusals, a verify run and the "
        f"simulated tour; {len(failures)} failed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
