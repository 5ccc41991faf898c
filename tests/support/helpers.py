"""What tests share: paths, the environment the `debate` command runs in, and well-formed agent replies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
"""The repository's root."""
FIXTURES = TESTS / "fixtures"
DATA = TESTS / "data"
"""Corpora the tests and benchmarks share (the multilingual sentence corpus)."""
PLUGINS = TESTS / "plugins"
"""The test-only plugin packages (tests/plugins/README.md)."""


def cli_env() -> dict[str, str]:
    """The environment the `debate` command runs in under test: no endpoint or key from the caller's shell."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL")}
    env["NO_COLOR"] = "1"
    return env


def sigint_default() -> None:
    """Popen's preexec_fn for a child that a test interrupts: a background shell (`cmd &`, nohup) starts pytest
    with SIGINT ignored, which its children inherit, so Python would install no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def debate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m debate.cli ARGS` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "debate.cli", *args], capture_output=True, text=True, timeout=timeout, env=cli_env()
    )


REFCHECKER_EXAMPLE: list[dict[str, object]] = [
    {
        "question": "Capital of France?",
        "response": "Paris is the capital of France.",
        "reference": "Paris is the capital and largest city of France.",
    },
    {
        "question": "Where is the Eiffel Tower?",
        "response": "The Eiffel Tower is in Paris. It opened in 1889.",
        "reference": ["The tower is in Paris.", "It opened to the public in 1889."],
        "claims": [["Eiffel Tower", "located in", "Paris"], ["Eiffel Tower", "opened in", "1889"]],
    },
]
"""Items in RefChecker's input format: a JSON array, no ids, reference as text or passages, optional triplets."""


def op(factual: bool, severity: int = 0, text: str = "reasoning") -> str:
    """A well-formed agent reply in the paper's format."""
    return json.dumps({"opinion": text, "factuality": factual, "Error severity": severity})
