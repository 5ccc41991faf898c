"""The pytest plugin as a user's suite meets it: installed by entry point, the debate_verifier fixture on a
scripted client or a configured endpoint, and a failure report naming every claim's label and reason."""

from __future__ import annotations

import pytest

from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op

pytestmark = pytest.mark.slow  # starts processes

USER_TESTS = """
import pytest
from markov_debate.pytest import assert_factual

KNOWLEDGE = "Paris is the capital and largest city of France."
SUPPORTED = {json_true!r}
REFUTED = {json_false!r}

@pytest.mark.debate_script({{"debate": [SUPPORTED] * 7}})
def test_right_answer_passes(debate_verifier):
    report = debate_verifier.assert_factual("Paris", question="Capital of France?", reference=KNOWLEDGE)
    assert report.usage.llm_calls == 7

@pytest.mark.debate_script({{"debate": [REFUTED] * 7}})
def test_wrong_answer_fails(debate_verifier):
    debate_verifier.assert_factual("Lyon", question="Capital of France?", reference=KNOWLEDGE)

def test_endpoint(debate_verifier):
    assert_factual("Paris", question="Capital of France?", reference=KNOWLEDGE, verifier=debate_verifier)
"""


# Plugins of other packages this suite's install has (Phoenix's client, DeepEval's) take 13 s to import in each
# pytest these tests start, and play no part in ours: a user's suite without them runs as these do.
OTHERS = ("-p", "no:phoenix", "-p", "no:deepeval", "-p", "no:cacheprovider")


def _write(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_answers=USER_TESTS.format(
            json_true=op(True, 0, "the knowledge names Paris"), json_false=op(False, 4, "the knowledge says Paris")
        )
    )


def test_plugin_is_installed_by_entry_point() -> None:
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "markov_debate"] == ["markov_debate.pytest"]


def test_scripted_verifier_passes_and_fails_with_a_clear_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    _write(pytester)
    result = pytester.runpytest_subprocess("-k", "right or wrong", *OTHERS)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "response judged non_factual (score 0.08, rollup any-false); expected factual\nresponse: Lyon\n" in out
    assert (
        "  claim 1 [non_factual, error severity 4/5 (severe), by debate]: Question: Capital of France? Answer: Lyon\n"
        in out
    )
    assert "    why: the knowledge says Paris\n" in out
    missing = pytester.runpytest_subprocess("-k", "endpoint", *OTHERS)
    missing.stdout.fnmatch_lines(["*debate_verifier: no endpoint configured; pass --debate-base-url URL*"])
    assert missing.ret != 0


def test_verifier_uses_the_configured_endpoint(pytester: pytest.Pytester) -> None:
    _write(pytester)
    with FakeOpenAI(responder=lambda body: Reply(content=op(True, 0, "supported"))) as server:
        result = pytester.runpytest_subprocess("-k", "endpoint", f"--debate-base-url={server.base_url}", *OTHERS)
        purposes = [h["x-debate-purpose"] for h in server.headers]
    result.assert_outcomes(passed=1)
    assert purposes[0] == "debate:initial" and len(purposes) == 7
    assert all(r["model"] == "fake-model" for r in server.requests)
