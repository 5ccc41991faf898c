"""Run by .ci/run in a venv holding only the core install (`pip install -e .`, no extras): every command's --help and
`debate --version` work, and each command whose extra is missing refuses in one line naming the install command.

    python .ci/core_install.py     # with the venv's python; `debate` is taken from the same venv
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
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
        ["export", "phoenix", "results.jsonl"],
        'debate export phoenix needs the otel extra: pip install "markov-debate[otel]"',
    ),
    (
        ["verify", "--answer", "A", "--base-url", "http://127.0.0.1:9/v1", "--otel", "http://127.0.0.1:9"],
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


def _simulate_runs() -> list[str]:
    """`debate dynamics simulate` needs no extra: it runs the engine against its own 127.0.0.1 endpoint."""
    with tempfile.TemporaryDirectory() as folder:
        roles = Path(folder) / "roles.toml"
        roles.write_text("seed = 1\n[roles.trust]\nconformity = 0.5\n")
        words = ["dynamics", "simulate", "--roles", str(roles), "--n", "5", "--out", str(Path(folder) / "sim")]
        done = subprocess.run([DEBATE, *words], capture_output=True, text=True, env=ENV, timeout=300)
    if done.returncode != 0 or not done.stdout.startswith("5 simulated claims"):
        return [f"debate {' '.join(words)}: exit {done.returncode}\n{done.stdout}{done.stderr[-2000:]}"]
    return []


def main() -> int:
    extras = [
        name
        for name in ("llama_cpp", "sentence_transformers", "fastapi", "sqlalchemy", "ray")
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
    failures += _simulate_runs()
    for failure in failures:
        print(f"FAILED {failure}")
    print(
        f"core install: {len(commands) + 2} help/version checks, {len(REFUSALS)} refusals, a simulated run; "
        f"{len(failures)} failed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
