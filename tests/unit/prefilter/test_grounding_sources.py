"""Logprob grounding on the logprob-grounding source's own example, run as a user would: its Hebrew answer through
`debate verify --task rag` against an endpoint on 127.0.0.1 that gives the source's p1/p0; and a citation to a
source that was not given, which no endpoint can make grounded."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import PrefilterConfig
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient, yes_no_response
from tests.support.fakes import Call, FakeOpenAI, Reply, Route
from tests.support.helpers import debate, op

ANSWER = 'השמאי קבע פיצוי של 50,000 ש"ח [S0]. זה נפוץ במקרים דומים.'
# The source's hallucination_check block: claim 1 cites S0 (p1 0.92, p0 0.25), claim 2 cites nothing (0.45, 0.42).
SEED_P = {"c0:grounding:p1": 0.92, "c0:grounding:p0": 0.25, "c1:grounding:p1": 0.45, "c1:grounding:p0": 0.42}


def _seed_logprobs(call: Call) -> Reply:
    p_yes = SEED_P[call.site or ""]
    top: list[dict[str, Any]] = [
        {"token": "YES", "logprob": math.log(p_yes), "bytes": None},
        {"token": "NO", "logprob": math.log(1 - p_yes), "bytes": None},
    ]
    first = top[0] if p_yes >= 0.5 else top[1]
    return Reply(content=first["token"], logprobs=[{**first, "top_logprobs": top}])


ROUTES: dict[str, Route] = {"grounding": _seed_logprobs, "debate": lambda call: Reply(content=op(True))}


@pytest.mark.slow
def test_the_sources_hebrew_example_has_two_claims_one_ungrounded_and_its_warning(tmp_path: Path) -> None:
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps({"S0": 'השמאי קבע כי הפיצוי יעמוד על 50,000 ש"ח.'}, ensure_ascii=False))
    common = [
        "verify",
        "--task",
        "rag",
        "--sources",
        str(sources),
        "--prefilter.prefilters",
        "logprob",
        "--answer",
        ANSWER,
        "--debate.min-rounds",
        "0",
        "--debate.max-rounds",
        "0",
    ]
    with FakeOpenAI(routes=ROUTES) as server:
        done = debate(*common, "--json", "--model.base-url", server.base_url)
        shown = debate(*common, "--model.base-url", server.base_url)
        assert server.unrouted == []
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    block = next(c for c in report["prefilter"]["checks"] if c["name"] == "logprob")["hallucination_check"]
    assert (block["total_claims"], block["grounded_claims"], block["overall_grounded"]) == (2, 1, False)
    assert [(c["text"], c["citing"], c["grounded"], c["warning"]) for c in block["claims"]] == [
        ('השמאי קבע פיצוי של 50,000 ש"ח', ["S0"], True, None),
        ("זה נפוץ במקרים דומים", [], False, "לא נמצא מקור מספק"),
    ]
    assert block["warning"] == "שים לב: 1 טענות בתשובה לא נתמכות במלואן על ידי המקורות."
    # The seed's formula is in nats; the report says which unit it uses.
    grounding = report["claims"][0]["prefilters"][0]["grounding"]
    assert grounding["unit"] == "nats" and "nats" in report["claims"][0]["prefilters"][0]["reason"]
    assert shown.returncode == 0, shown.stderr
    assert "warning: שים לב: 1 טענות בתשובה לא נתמכות במלואן על ידי המקורות." in shown.stdout


@pytest.mark.parametrize("p0", [0.05, 0.95])
async def test_a_citation_to_a_source_that_was_not_given_is_never_grounded(p0: float) -> None:
    """[S9] with sources S0-S2: whatever P(yes) the endpoint gives (even one that falls as if a source had been
    redacted), the claim is not grounded, and says why."""
    client = ScriptedChatClient({"grounding@a": [yes_no_response(0.97), yes_no_response(p0)], "debate": [op(True)]})
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        prefilter=PrefilterConfig(
            prefilters=["logprob"], options={"logprob": {"trust_grounded": True, "grounded_confidence": 0.5}}
        ),
    )
    sources = {"S0": "Paris is the capital of France.", "S1": "The Seine.", "S2": "Lyon."}
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(
            TaskInput("Paris is the capital of France [S9].", reference=sources, id="a"), task="rag"
        )
    [claim] = report.claims
    decision = claim.prefilters[0]
    assert decision.grounding is not None and decision.grounding.invalid_citations == ["S9"]
    assert (decision.grounding.grounded, decision.grounding.has_citations, decision.decision) == (False, True, "pass")
    assert claim.decided_by == "debate"  # never decided factual by the prefilter
    assert report.prefilter is not None
    [check] = [c for c in report.prefilter.checks if c.hallucination_check is not None]
    assert check.hallucination_check is not None and check.hallucination_check.grounded_claims == 0
    redacted = [c.request.messages[-1].content for c in client.calls if c.request.purpose == "grounding"]
    assert all("[REDACTED]" not in text for text in redacted)  # nothing of S0-S2 is cited, nothing is redacted


async def test_the_ten_claim_cap_of_the_source_is_said_where_the_block_is_read() -> None:
    """Seed 002 "Limits": at most 10 claims verified per response; the eleventh and twelfth are debated, unscored,
    and the response's logprob line says so."""
    answer = " ".join(f"Sentence number {i} is a claim of its own [S0]." for i in range(12))
    client = ScriptedChatClient(
        {"grounding": [yes_no_response(0.9), yes_no_response(0.2)] * 10, "debate": [op(True)] * 12}
    )
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0), prefilter=PrefilterConfig(prefilters=["logprob"])
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput(answer, reference={"S0": "Numbers."}), task="rag")
    assert len(report.claims) == 12 and client.remaining == 0
    assert report.prefilter is not None
    [check] = [c for c in report.prefilter.checks if c.name == "logprob"]
    assert check.hallucination_check is not None and check.hallucination_check.total_claims == 10
    assert "2 claim(s) beyond the first 10 were not scored" in check.reason
