"""A pytest plugin (entry point `pytest11`, loaded when markov-debate is installed): check your own system's
answers for hallucinations inside your test suite.

    def test_capital(debate_verifier):
        answer = my_rag_app("What is the capital of France?")
        debate_verifier.assert_factual(answer, reference=KNOWLEDGE, question="What is the capital of France?")

`debate_verifier` uses the configured endpoint (`--debate-base-url`, the `debate_base_url` ini option, or
OPENAI_BASE_URL; `--debate-model` / `debate_model` / DEBATE_MODEL; the key from OPENAI_API_KEY) or, when none is
configured, the scripted client of the test's `@pytest.mark.debate_script({...})` marker (replies routed by their
declared purpose, e.g. {"debate": [...]}), so a suite runs offline too. Neither is a usage error, never a silent
pass. `assert_factual` fails with a report of every claim: its label, severity, who decided and why.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from debate.config import ModelConfig, VerifierConfig
from debate.llm import ChatClient
from debate.pipeline import Verifier, run_blocking
from debate.plugins import TaskInput
from debate.results import severity_text
from debate.testing import ScriptedChatClient, Step
from debate.types import ClaimVerdict, Report, ReportVerdict

__all__ = ["DebateVerifier", "assert_factual", "debate_verifier", "describe_report"]


class DebateVerifier:
    """A synchronous verifier for tests; each call opens a short-lived Verifier on the same configuration (and the
    same scripted client, whose script runs on across calls)."""

    def __init__(self, config: VerifierConfig, client: ChatClient | None = None) -> None:
        self.config = config
        self.client = client
        self.reports: list[Report] = []
        """Every report this verifier produced, in order."""

    def verify(self, response: str, *, reference: Any = None, question: str | None = None, task: str = "qa") -> Report:

        async def run() -> Report:
            async with Verifier(config=self.config, client=self.client) as verifier:
                return await verifier.verify(TaskInput(response, question=question, reference=reference), task=task)

        report = run_blocking(run())
        self.reports.append(report)
        return report

    def assert_factual(
        self,
        response: str,
        *,
        reference: Any = None,
        question: str | None = None,
        task: str = "qa",
        allow: Iterable[ReportVerdict] = ("factual",),
    ) -> Report:
        """Verify `response` and fail the test unless its verdict is in `allow` (default: factual only)."""
        report = self.verify(response, reference=reference, question=question, task=task)
        allowed = set(allow)
        if report.verdict not in allowed:
            pytest.fail(describe_report(report, expected=sorted(allowed)), pytrace=False)
        return report


def assert_factual(
    response: str,
    *,
    reference: Any = None,
    question: str | None = None,
    task: str = "qa",
    config: VerifierConfig | None = None,
    verifier: DebateVerifier | None = None,
    allow: Iterable[ReportVerdict] = ("factual",),
) -> Report:
    """Fail the calling test unless `response` is judged factual (or another verdict in `allow`). Uses `verifier`
    (e.g. the `debate_verifier` fixture), else a verifier on `config`, else the environment's endpoint
    (OPENAI_BASE_URL, DEBATE_MODEL, OPENAI_API_KEY). Returns the report."""
    chosen = verifier or DebateVerifier(config or VerifierConfig(model=ModelConfig.from_env()))
    if chosen.config.model.base_url is None and chosen.client is None:
        raise pytest.UsageError(
            "assert_factual: no endpoint configured; set OPENAI_BASE_URL (or pass config=/verifier=), or use the "
            "debate_verifier fixture with @pytest.mark.debate_script"
        )
    return chosen.assert_factual(response, reference=reference, question=question, task=task, allow=allow)


def describe_report(report: Report, *, expected: Sequence[str]) -> str:
    """The failure message: the verdict against what was expected, then one block per claim."""
    score = "n/a" if report.score is None else f"{report.score:.2f}"
    lines = [
        f"response judged {report.verdict} (score {score}, rollup {report.rollup}); expected {' or '.join(expected)}",
        f"response: {_short(report.response, 200)}",
    ]
    if report.failure is not None:
        lines.append(f"failed ({report.failure.kind}): {report.failure.message}")
    for index, claim in enumerate(report.claims, 1):
        lines.append(_claim_lines(index, claim))
    lines.append(f"{report.models_said()}; {report.usage.llm_calls} calls")
    return "\n".join(lines)


def _claim_lines(index: int, claim: ClaimVerdict) -> str:
    label = claim.label or claim.status
    severity = f"error severity {severity_text(claim.error_severity)}"
    head = f"  claim {index} [{label}, {severity}, by {claim.decided_by}]: {_short(claim.text, 160)}"
    why = claim.reason or (claim.debate.final.opinion if claim.debate and claim.debate.final else "")
    return head + (f"\n    why: {_short(why, 300)}" if why else "")


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the plugin -----------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("markov-debate", "hallucination checks (markov-debate)")
    group.addoption("--debate-base-url", default=None, help="endpoint for debate_verifier (default: OPENAI_BASE_URL)")
    group.addoption("--debate-model", default=None, help="model for debate_verifier (default: DEBATE_MODEL)")
    parser.addini("debate_base_url", "endpoint for debate_verifier", default="")
    parser.addini("debate_model", "model for debate_verifier", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "debate_script(routes): scripted model replies for debate_verifier, by purpose (offline tests)"
    )


@pytest.fixture
def debate_verifier(request: pytest.FixtureRequest) -> DebateVerifier:
    """A DebateVerifier on the configured endpoint, or on the test's `debate_script` marker when none is set."""
    options = request.config
    base_url = (
        options.getoption("--debate-base-url")
        or options.getini("debate_base_url")
        or os.environ.get("OPENAI_BASE_URL")
        or None
    )
    model = options.getoption("--debate-model") or options.getini("debate_model") or None
    marker = request.node.get_closest_marker("debate_script")
    if base_url is not None:
        return DebateVerifier(VerifierConfig(model=ModelConfig.from_env(base_url=base_url, model=model)))
    if marker is None:
        raise pytest.UsageError(
            "debate_verifier: no endpoint configured; pass --debate-base-url URL (or set debate_base_url in the "
            "ini file, or OPENAI_BASE_URL), or mark the test @pytest.mark.debate_script({...}) to script the replies"
        )
    routes: Mapping[str, Sequence[Step]] | Sequence[Step] = marker.args[0] if marker.args else marker.kwargs["routes"]
    client = ScriptedChatClient(routes)
    return DebateVerifier(VerifierConfig(model=ModelConfig(model="scripted")), client=client)
