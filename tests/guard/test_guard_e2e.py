"""`debate guard` end to end, as a RAG service calls it: the OpenAI Python client -> the guard (real HTTP on
127.0.0.1) -> a scripted upstream; the judge is a second scripted endpoint. Annotate, flag, block, both streaming
modes, fail-open and fail-closed, each as docs/guard.md says; every decision is found in the desk's store."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from debate.config import DebateConfig
from markov_debate.desk.store import Store
from markov_debate.desk.tables import AuditRow, ClaimRow, GuardDecisionRow
from tests.guard.conftest import BAD_CITATION, GOOD, SOURCES, judge_config
from tests.support.calibration import calibration, save_calibration
from tests.support.fakes import FakeOpenAI, Reply
from tests.support.helpers import op
from tests.support.phoenix import need


def _judge() -> FakeOpenAI:
    """Says false to a claim naming Lyon, true to any other (a rule on what it is asked, never on prompt wording);
    extracts one claim from an answer that came without sources."""
    return FakeOpenAI(
        routes={
            "debate": lambda call: Reply(content=op("Lyon" not in call.asked)),
            "extract": lambda call: Reply(content=json.dumps({"claims": ["Paris is the capital of France."]})),
        }
    )


def _upstream(answer: str, **reply: Any) -> FakeOpenAI:
    return FakeOpenAI(responder=lambda body: Reply(content=answer, **reply))


def _client(base_url: str, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="caller-key", **kwargs)


def _ask(client: openai.OpenAI, **kwargs: Any) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="fake-model",
        messages=[{"role": "user", "content": "What is the capital of France, and which river flows there?"}],
        extra_body={"sources": SOURCES},
        **kwargs,
    )


def _v(obj: Any) -> dict[str, Any]:
    """The `verification` the guard adds to a completion or a stream's last chunk."""
    extra = obj.model_extra
    assert extra is not None and "verification" in extra, obj
    found: dict[str, Any] = extra["verification"]
    return found


def _decisions(db_url: str) -> list[tuple[GuardDecisionRow, AuditRow]]:
    store = Store(db_url)
    try:
        with store._session() as s:
            rows = s.execute(select(GuardDecisionRow, AuditRow).join(AuditRow)).all()
            return [(g, a) for g, a in rows]
    finally:
        store.close()


def test_annotate_passes_the_answer_with_its_verification(guard_for: Any, db_url: str) -> None:
    with _upstream(GOOD) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url)
        raw = _ask(_client(guard.base_url))
        completion = raw.parse()
        guard.__exit__()
    found = _v(completion)
    assert completion.choices[0].message.content == GOOD
    assert (found["status"], found["verdict"], found["risk"], found["action"]) == (
        "verified",
        "factual",
        "low",
        "annotated",
    )
    assert raw.headers["x-debate-action"] == "annotated" and raw.headers["x-debate-verdict"] == "factual"
    assert raw.headers["x-debate-request-id"] == found["request_id"]
    # the request went upstream unchanged but for its sources
    assert "sources" not in upstream.requests[0] and upstream.requests[0]["messages"][0]["role"] == "user"
    [(decision, audit)] = _decisions(db_url)
    assert (decision.action, decision.policy, decision.request_id) == ("annotated", "annotate", found["request_id"])
    assert (audit.status, audit.task, audit.verdict) == ("done", "rag", "factual")


def test_block_replaces_a_risky_answer_and_says_why(guard_for: Any, db_url: str) -> None:
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy="block")
        completion = _ask(_client(guard.base_url)).parse()
        guard.__exit__()
    found = _v(completion)
    assert (found["risk"], found["action"]) == ("high", "blocked")
    assert completion.choices[0].finish_reason == "content_filter"
    content = completion.choices[0].message.content
    assert content.startswith("This answer was withheld") and "Lyon" not in content
    # the end user reads which statement, never the engine's claim id (the caller's `flagged` keeps it)
    assert "statement 2 of 2 is contradicted by the sources" in content
    assert not any(f"{f['claim_id']} " in content for f in found["flagged"]), content
    assert [f["text"] for f in found["flagged"]] == ["The Seine flows through Lyon"]
    [(decision, audit)] = _decisions(db_url)
    assert decision.action == "blocked" and json.loads(decision.verification_json)["risk"] == "high"
    assert json.loads(audit.request_json)["response"] == BAD_CITATION and audit.status == "done"


def test_flag_passes_a_risky_answer_and_queues_it_for_review(guard_for: Any, db_url: str) -> None:
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy="flag")
        completion = _ask(_client(guard.base_url)).parse()
        guard.__exit__()
    assert completion.choices[0].message.content == BAD_CITATION
    assert _v(completion)["action"] == "flagged"
    [(decision, audit)] = _decisions(db_url)
    store = Store(db_url)
    try:
        with store._session() as s:
            queued = s.scalars(select(ClaimRow).where(ClaimRow.audit_id == audit.id)).all()
    finally:
        store.close()
    assert decision.action == "flagged" and audit.status == "done"
    assert {(c.text, c.queue) for c in queued} >= {("The Seine flows through Lyon", "needs-review")}


@pytest.mark.parametrize("policy", ["annotate", "block"])
def test_stream_hold_verifies_then_streams(guard_for: Any, policy: str) -> None:
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy=policy, stream="hold")
        chunks = list(
            _client(guard.base_url).chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": "Capital?"}],
                extra_body={"sources": SOURCES},
                stream=True,
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    found = _v(chunks[-1])
    assert chunks[-1].choices == [] and found["risk"] == "high"
    if policy == "block":
        assert found["action"] == "blocked" and text.startswith("This answer was withheld")
        assert "Lyon" not in text and chunks[-2].choices[0].finish_reason == "content_filter"
    else:
        assert found["action"] == "annotated" and text == BAD_CITATION


def test_stream_pass_streams_as_it_comes_and_a_block_becomes_a_flag(guard_for: Any) -> None:
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy="block", stream="pass")
        stream = _client(guard.base_url).chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Capital?"}],
            extra_body={"sources": SOURCES},
            stream=True,
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    found = _v(chunks[-1])
    assert text == BAD_CITATION and found["action"] == "flagged"
    assert any("could not be blocked" in note for note in found["notes"])


@pytest.mark.parametrize("stream", ["hold", "pass"])
def test_a_stream_cut_before_done_is_upstream_malformed_in_both_modes(guard_for: Any, stream: str) -> None:
    """A stream that ends without [DONE]: `hold` answers 502 upstream_malformed (nothing was sent yet); `pass` has
    sent the 200 and the first chunks already, so the same type comes in band, as an error event, and nothing is
    verified (issue 73: pass said upstream_unavailable, the docs' table 502)."""
    with _upstream(GOOD, stream_cut=True) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, stream=stream)
        body = {"model": "m", "messages": [{"role": "user", "content": "Capital?"}], "sources": SOURCES, "stream": True}
        answer = httpx.post(guard.base_url + "/chat/completions", json=body, timeout=30)
    if stream == "hold":
        assert answer.status_code == 502 and answer.json()["error"]["type"] == "upstream_malformed", answer.text
        return
    assert answer.status_code == 200
    events = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    assert json.loads(events[-1])["error"]["type"] == "upstream_malformed", events[-1]
    assert "[DONE]" not in events and not any('"verification"' in e for e in events)


@pytest.mark.parametrize("stream", [None, "hold", "pass"])
def test_an_answer_past_the_limit_is_refused_not_held(guard_for: Any, stream: str | None) -> None:
    """An upstream answer over `max_answer_bytes` (whole or streamed) is not held to be verified: 502
    upstream_malformed naming the limit, or that error in band once a `pass` stream is out (issue 73: a 20 MB
    streamed answer raised the guard's RSS by 170 MB, never given back)."""
    with _upstream("Paris is the capital of France. " * 400) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, stream=stream or "hold", max_answer_bytes=4096)
        body = {"model": "m", "messages": [{"role": "user", "content": "Capital?"}], "sources": SOURCES}
        answer = httpx.post(guard.base_url + "/chat/completions", json={**body, "stream": bool(stream)}, timeout=30)
    if stream == "pass" and answer.status_code == 200:
        events = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
        error = json.loads(events[-1])["error"]
        assert "[DONE]" not in events
    else:
        # `pass` too, when the limit is passed before the first event is read (the upstream's bytes can arrive in
        # one read): nothing was sent yet, so it is the error response a whole answer gets
        assert answer.status_code == 502, answer.text
        error = answer.json()["error"]
    assert error["type"] == "upstream_malformed" and "over 4,096 bytes" in error["message"], error


def test_fail_open_passes_an_unverified_answer_marked_so(guard_for: Any) -> None:
    down = FakeOpenAI(responder=lambda body: Reply(status=503, error_message="judge overloaded"))
    with _upstream(GOOD) as upstream, down:
        guard = guard_for(upstream.base_url, down.base_url, on_failure="open")
        raw = _ask(_client(guard.base_url))
    found = _v(raw.parse())
    assert raw.parse().choices[0].message.content == GOOD
    assert (found["status"], found["action"], found["verdict"]) == ("unverified", "passed-unverified", None)
    assert raw.headers["x-debate-status"] == "unverified" and "not verified" in found["notes"][-1]


def test_fail_closed_refuses_and_the_client_does_not_resend(guard_for: Any) -> None:
    slow = FakeOpenAI(responder=lambda body: Reply(content=op(True), delay_s=3))
    with _upstream(GOOD) as upstream, slow:
        guard = guard_for(upstream.base_url, slow.base_url, on_failure="closed", check_timeout_s=0.5)
        with pytest.raises(openai.InternalServerError) as caught:
            _ask(_client(guard.base_url, max_retries=2))
    assert caught.value.status_code == 503 and "longer than 0.5 s" in str(caught.value)
    assert len(upstream.requests) == 1  # x-should-retry: false kept the client from sending it again


def test_upstream_faults_are_502s_with_their_cause(guard_for: Any) -> None:
    with _judge() as judge, FakeOpenAI(responder=lambda body: Reply(body="<html>oops</html>")) as broken:
        guard = guard_for(broken.base_url, judge.base_url)
        with pytest.raises(openai.APIStatusError) as caught:
            _ask(_client(guard.base_url, max_retries=0))
        assert caught.value.status_code == 502 and "not JSON" in str(caught.value)
        gone = guard_for("http://127.0.0.1:9/v1", judge.base_url)
        with pytest.raises(openai.APIStatusError) as caught:
            _ask(_client(gone.base_url, max_retries=0))
        assert caught.value.status_code == 502 and "did not answer" in str(caught.value)
    with _judge() as judge, _upstream("x", status=429, error_message="slow down") as limited:
        guard = guard_for(limited.base_url, judge.base_url)
        with pytest.raises(openai.RateLimitError):
            _ask(_client(guard.base_url, max_retries=0))  # the upstream's own status is passed on


def test_sources_in_messages_and_a_request_without_any(guard_for: Any) -> None:
    with _upstream(GOOD) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url)
        client = _client(guard.base_url)
        system = (
            "Answer from these passages.\n[doc1] Paris is the capital of France.\n[doc2] The Seine flows through Paris."
        )
        cited = client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "Capital?"}],
        )
        bare = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "Capital?"}])
    assert _v(cited)["sources"] == 2
    assert _v(cited)["verdict"] == "factual"
    assert (_v(bare)["sources"], _v(bare)["verdict"]) == (0, "factual")  # on the judge's own knowledge, said so
    assert any("no sources" in note for note in _v(bare)["notes"])


def test_debate_later_answers_on_the_cheap_checks_and_queues_the_debate(guard_for: Any, db_url: str) -> None:
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy="block", debate="later")
        completion = _ask(_client(guard.base_url)).parse()
        guard.__exit__()
        assert judge.calls == []  # no debate in the request path
    found = _v(completion)
    assert (found["status"], found["action"], found["risk"]) == ("partial", "blocked", "high")
    [(decision, audit)] = _decisions(db_url)
    assert audit.status == "pending" and decision.status == "partial"


def test_keys_are_required_once_configured_and_a_key_s_policy_wins(guard_for: Any) -> None:
    import hashlib

    key = {"name": "legal-team", "sha256": hashlib.sha256(b"caller-key").hexdigest(), "policy": "block"}
    with _upstream(BAD_CITATION) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, keys=[key], upstream_key="upstream-secret")
        with pytest.raises(openai.AuthenticationError):
            _ask(openai.OpenAI(base_url=guard.base_url, api_key="wrong", max_retries=0))
        completion = _ask(_client(guard.base_url)).parse()
    assert _v(completion)["action"] == "blocked"
    assert upstream.headers[-1]["authorization"] == "Bearer upstream-secret"  # the caller's key stays here


def test_the_judge_config_is_the_engine_s_own(guard_for: Any) -> None:
    """The guard verifies with the same engine configuration every command uses (prefilters, chain, prompts)."""
    with _upstream(GOOD) as upstream, _judge() as judge:
        config = judge_config(judge.base_url, prefilters=[])
        guard = guard_for(upstream.base_url, judge.base_url, verifier=config)
        completion = _ask(_client(guard.base_url)).parse()
    assert _v(completion)["verdict"] == "factual"
    assert set(judge.purposes) == {"debate:initial"}


def test_each_decision_is_traced_with_the_engine_s_spans_inside(guard_for: Any) -> None:
    need("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from debate import telemetry

    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    try:
        with _upstream(BAD_CITATION) as upstream, _judge() as judge:
            guard = guard_for(upstream.base_url, judge.base_url, policy="flag")
            found = _v(_ask(_client(guard.base_url)).parse())
            guard.__exit__()
    finally:
        telemetry.shutdown()
    spans = exporter.get_finished_spans()
    [request] = [s for s in spans if s.name == "guard"]
    [verification] = [s for s in spans if s.name == "verification"]
    assert request.attributes is not None and request.attributes["debate.request_id"] == found["request_id"]
    assert verification.parent is not None and verification.parent.span_id == request.context.span_id
    assert verification.attributes is not None and verification.attributes["debate.action"] == "flagged"
    claims = [s for s in spans if s.name.startswith("claim ")]
    assert claims and all(s.context.trace_id == request.context.trace_id for s in claims)


def test_an_upstream_answer_that_is_not_unicode_or_has_no_choices(guard_for: Any) -> None:
    """`\\ud800` in a JSON string is valid JSON and no character: the answer is checked with U+FFFD in its place and
    returned as the upstream sent it; a completion without choices is the upstream's fault (502), not a 500."""
    odd = json.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": GOOD + " \ud800"}, "finish_reason": "stop"}
            ],
        }
    )
    none = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": []})
    with _judge() as judge, FakeOpenAI(responder=lambda body: Reply(body=odd)) as upstream:
        guard = guard_for(upstream.base_url, judge.base_url)
        raw = httpx.post(
            f"{guard.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "q"}], "sources": SOURCES},
            timeout=30,
        )
    assert raw.status_code == 200 and raw.content.isascii()
    assert raw.json()["choices"][0]["message"]["content"].endswith("\ud800")
    assert raw.json()["verification"]["verdict"] == "factual"
    with _judge() as judge, FakeOpenAI(responder=lambda body: Reply(body=none)) as upstream:
        guard = guard_for(upstream.base_url, judge.base_url)
        with pytest.raises(openai.APIStatusError) as caught:
            _ask(_client(guard.base_url, max_retries=0))
    assert caught.value.status_code == 502 and "no choices" in str(caught.value)


def test_one_caller_s_upstream_cookies_never_reach_another_caller_s_request(guard_for: Any) -> None:
    """The guard is one client of the upstream for every caller: a cookie the upstream sets (a load balancer's
    affinity, a session) is not kept and sent with the next caller's request."""
    upstream = FakeOpenAI(
        responder=lambda body: Reply(content=GOOD, headers={"set-cookie": "session=caller-a; Path=/"})
    )
    with upstream, _judge() as judge:
        # By name, not by address: a client's cookie jar takes no cookie from a bare IP address.
        by_name = upstream.base_url.replace("127.0.0.1", "localhost")
        guard = guard_for(by_name, judge.base_url)
        for _ in range(2):
            _ask(_client(guard.base_url))
    assert len(upstream.headers) == 2 and "cookie" not in upstream.headers[1]


def test_each_choice_of_a_completion_is_verified_and_recorded_under_its_own_id(guard_for: Any, db_url: str) -> None:
    choices = [
        {"index": n, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        for n, text in enumerate([GOOD, BAD_CITATION])
    ]
    body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "fake-model", "choices": choices})
    with FakeOpenAI(responder=lambda body_: Reply(body=body)) as upstream, _judge() as judge:
        guard = guard_for(upstream.base_url, judge.base_url, policy="flag", debate="later")
        raw = _ask(_client(guard.base_url), n=2)
        completion = raw.parse()
        guard.__exit__()
        assert judge.calls == []
    assert [c.message.content for c in completion.choices] == [GOOD, BAD_CITATION]
    # The response shows the riskier choice's verification; each choice's decision is kept under its own id.
    found = _v(completion)
    base = found["request_id"].rsplit(".", 1)[0]
    assert (found["request_id"], found["risk"], found["action"]) == (f"{base}.1", "high", "flagged")
    decisions = {d.request_id: a.request_json for d, a in _decisions(db_url)}
    assert set(decisions) == {f"{base}.0", f"{base}.1"}
    assert json.loads(decisions[f"{base}.1"])["response"] == BAD_CITATION


def test_a_running_guard_takes_a_new_calibration_and_names_it(guard_for: Any, db_url: str, tmp_path: Path) -> None:
    """The calibration file replaced while the guard runs: the next answer is scored by the new file (no restart),
    and each decision's stored report names the sha256 of the file that scored it."""
    first = calibration(model="fake-model")
    path = Path(save_calibration(tmp_path, first))
    with _upstream(GOOD) as upstream, _judge() as model:
        judge = judge_config(model.base_url)
        verifier = judge.model_copy(update={"debate": DebateConfig(calibration=str(path))})
        guard = guard_for(upstream.base_url, model.base_url, verifier=verifier)
        before = _v(_ask(_client(guard.base_url)).parse())
        rarer = first.fitted_on.model_copy(update={"factual_share": 0.1})
        fresh = tmp_path / "fresh.json"
        fresh.write_text(first.model_copy(update={"fitted_on": rarer}).model_dump_json())
        stat = path.stat()
        fresh.replace(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new file, whatever the clock
        after = _v(_ask(_client(guard.base_url)).parse())
        guard.__exit__()
    # both answers verified factual by the same judge; the new file's base rate (0.1 against 0.5) divides each
    # claim's prior odds by 9, so the answer's odds fall by about that much
    assert (before["verdict"], after["verdict"]) == ("factual", "factual")
    odds = [v["p_factual"] / (1 - v["p_factual"]) for v in (before, after)]
    assert 6 < odds[0] / odds[1] < 12
    shas = [json.loads(a.report_json or "{}")["calibration"]["sha256"] for _, a in _decisions(db_url)]
    assert shas == [hashlib.sha256(first.model_dump_json().encode()).hexdigest(), _sha(path)]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
