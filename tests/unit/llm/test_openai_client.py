"""Real HTTP against scripted servers on 127.0.0.1: retry policy, error classes, structured output, logprobs."""

from __future__ import annotations

from typing import Any

import pytest

from debate.calls import OPINION_SCHEMA
from debate.config import ModelConfig
from debate.llm import ChatMessage, ChatRequest, ModelRequestError, ModelUnavailableError
from debate.llm._openai_client import OpenAIChatClient
from debate.retry import retry_after_seconds
from tests.support.fakes import FakeOpenAI, Reply

REQUEST = ChatRequest(messages=[ChatMessage(role="user", content="hi")])


def _client(server: FakeOpenAI, **overrides: Any) -> OpenAIChatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "fake-model",
        "backoff_initial_s": 0.01,
        "backoff_max_s": 2.0,
        "max_attempts": 4,
        "timeout_s": 5.0,
    }
    settings.update(overrides)
    return OpenAIChatClient(config=ModelConfig(**settings))


async def test_429_is_retried_after_the_servers_retry_after() -> None:
    with FakeOpenAI([Reply(status=429, headers={"Retry-After": "0.3"}), Reply(content="hello")]) as server:
        client = _client(server)
        response = await client.complete(REQUEST)
        await client.aclose()
    assert response.text == "hello" and response.http_attempts == 2
    assert server.request_times[1] - server.request_times[0] >= 0.29
    assert response.usage.llm_calls == 1 and response.usage.prompt_tokens == 11


async def test_5xx_retried_until_success() -> None:
    script = [Reply(status=500), Reply(status=502), Reply(status=503), Reply(content="ok")]
    with FakeOpenAI(script) as server:
        client = _client(server)
        response = await client.complete(REQUEST)
        await client.aclose()
    assert response.text == "ok" and response.http_attempts == 4 and len(server.requests) == 4


async def test_persistent_5xx_gives_up_after_the_attempt_limit() -> None:
    with FakeOpenAI([Reply(status=500)] * 5) as server:
        client = _client(server, max_attempts=3)
        with pytest.raises(ModelUnavailableError, match=r"HTTP 500.*after 3 attempts"):
            await client.complete(REQUEST)
        await client.aclose()
    assert len(server.requests) == 3


async def test_timeout_is_retried() -> None:
    with FakeOpenAI([Reply(content="late", delay_s=1.5), Reply(content="on time")]) as server:
        client = _client(server, timeout_s=0.5)
        response = await client.complete(REQUEST)
        await client.aclose()
    assert response.text == "on time" and response.http_attempts == 2


async def test_connection_refused_is_unavailable() -> None:
    with FakeOpenAI([]) as server:
        url = server.base_url
    client = OpenAIChatClient(config=ModelConfig(base_url=url, model="m", max_attempts=2, backoff_initial_s=0.01))
    with pytest.raises(ModelUnavailableError, match=r"connection refused by 127\.0\.0\.1:.* after 2 attempts"):
        await client.complete(REQUEST)
    await client.aclose()


@pytest.mark.parametrize("retry_refused", [True, False])
async def test_a_refused_connection_is_retried_unless_told_not_to(
    retry_refused: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """retry_refused=False (the guard's judge): nothing listening fails at once, no retry ladder, no retry line;
    a 5xx is still retried."""
    with FakeOpenAI([]) as server:
        url = server.base_url
    config = ModelConfig(base_url=url, model="m", max_attempts=3, backoff_initial_s=0.01, retry_refused=retry_refused)
    client = OpenAIChatClient(config=config)
    with caplog.at_level("WARNING", logger="debate.retry"), pytest.raises(ModelUnavailableError) as caught:
        await client.complete(REQUEST)
    await client.aclose()
    assert ("after 3 attempts" if retry_refused else "after 1 attempt") in str(caught.value)
    assert len([r for r in caplog.records if "retry" in r.getMessage()]) == (2 if retry_refused else 0)
    with FakeOpenAI([Reply(status=503), Reply(content="ok")]) as server:
        client = _client(server, retry_refused=False)
        assert (await client.complete(REQUEST)).text == "ok"
        await client.aclose()


@pytest.mark.parametrize(("status", "fatal"), [(401, True), (404, True), (400, False)])
async def test_client_errors_fail_at_once(status: int, fatal: bool) -> None:
    with FakeOpenAI([Reply(status=status, error_message="nope")] * 3) as server:
        client = _client(server)
        with pytest.raises(ModelRequestError, match=f"HTTP {status}") as caught:
            await client.complete(REQUEST)
        await client.aclose()
    assert caught.value.fatal is fatal
    assert len(server.requests) == 1


async def test_auto_structured_output_falls_back_to_llama_cpp_form() -> None:
    def responder(body: dict[str, Any]) -> Reply:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Reply(status=400, error_message="response_format type json_schema is not supported")
        return Reply(content='{"ok": true}')

    request = ChatRequest(messages=[ChatMessage(role="user", content="x")], response_schema=OPINION_SCHEMA)
    with FakeOpenAI(responder=responder) as server:
        client = _client(server)
        await client.complete(request)
        await client.complete(request)
        await client.aclose()
    formats = [r["response_format"] for r in server.requests]
    assert formats[0]["type"] == "json_schema" and formats[0]["json_schema"]["schema"] == OPINION_SCHEMA
    assert formats[1] == {"type": "json_object", "schema": OPINION_SCHEMA}
    assert formats[2] == formats[1]  # remembered: no second rejected request
    assert client.structured_mode == "json_object"


async def test_plain_mode_sends_no_response_format_and_sampling_defaults() -> None:
    request = ChatRequest(messages=[ChatMessage(role="user", content="x")], response_schema=OPINION_SCHEMA)
    with FakeOpenAI([Reply(content="{}")]) as server:
        client = _client(server, structured_output="none")
        await client.complete(request)
        await client.aclose()
    sent = server.requests[0]
    assert "response_format" not in sent
    assert sent["temperature"] == 0.0 and sent["seed"] == 0 and sent["model"] == "fake-model"


async def test_logprobs_keep_token_strings() -> None:
    logprobs = [
        {
            "token": "YES",
            "logprob": -0.1,
            "bytes": None,
            "top_logprobs": [
                {"token": "YES", "logprob": -0.1, "bytes": None},
                {"token": "NO", "logprob": -2.4, "bytes": None},
            ],
        }
    ]
    request = ChatRequest(messages=[ChatMessage(role="user", content="x")], logprobs=True, top_logprobs=2)
    with FakeOpenAI([Reply(content="YES", logprobs=logprobs)]) as server:
        client = _client(server)
        response = await client.complete(request)
        await client.aclose()
    assert server.requests[0]["logprobs"] is True and server.requests[0]["top_logprobs"] == 2
    assert response.logprobs is not None
    assert [(t.token, t.logprob) for t in response.logprobs[0].top] == [("YES", -0.1), ("NO", -2.4)]


async def test_model_resolution() -> None:
    with FakeOpenAI([], models=("only-one",)) as server:
        client = _client(server, model=None)
        assert await client.resolve_model() == "only-one"
        await client.aclose()
    with FakeOpenAI([], models=("a", "b")) as server:
        client = _client(server, model=None)
        with pytest.raises(ModelRequestError, match="serves 2 models"):
            await client.resolve_model()
        await client.aclose()


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({}) is None


async def test_no_model_slot_is_held_while_backing_off() -> None:
    """One slot (max_concurrency 1): while the first call waits out a Retry-After, the second call is sent."""
    import asyncio

    script = [Reply(status=503, headers={"Retry-After": "0.4"}), Reply(content="second"), Reply(content="first")]
    with FakeOpenAI(script) as server:
        client = _client(server, max_concurrency=1)
        first = asyncio.create_task(client.complete(REQUEST))
        await asyncio.sleep(0.1)
        second = await client.complete(REQUEST)
        first_response = await first
        await client.aclose()
    assert (second.text, first_response.text) == ("second", "first")
    arrivals = server.request_times
    assert arrivals[1] - arrivals[0] < 0.3  # the second call did not queue behind the first one's backoff
    assert arrivals[2] - arrivals[0] >= 0.39
    # latency_s is the answering attempt's own time, not the backoff or the queueing before it.
    assert first_response.latency_s < 0.3 and first_response.http_attempts == 2


async def test_context_overflow_is_its_own_typed_error() -> None:
    from debate.errors import ContextTooLongError

    message = "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens."
    with FakeOpenAI([Reply(status=400, error_message=message)]) as server:
        client = _client(server)
        with pytest.raises(ContextTooLongError) as caught:
            await client.complete(REQUEST)
        await client.aclose()
    assert caught.value.kind == "context_too_long" and not caught.value.fatal and len(server.requests) == 1


MALFORMED = {
    "html": Reply(body="<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    "truncated json": Reply(body='{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "cont'),
    "error with 200": Reply(body='{"error": {"message": "overloaded", "type": "server_error"}}'),
    "no choices": Reply(body='{"id": "x", "object": "chat.completion", "created": 0, "choices": []}'),
    "null content": Reply(
        body='{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
        '"message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]}'
    ),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_a_malformed_200_is_retried_like_a_5xx(kind: str) -> None:
    with FakeOpenAI([MALFORMED[kind], Reply(content="fine")]) as server:
        client = _client(server)
        response = await client.complete(REQUEST)
        await client.aclose()
    assert response.text == "fine" and response.http_attempts == 2


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_a_persistently_malformed_200_is_unavailable_not_a_crash(kind: str) -> None:
    with FakeOpenAI([MALFORMED[kind]] * 3) as server:
        client = _client(server, max_attempts=3)
        with pytest.raises(ModelUnavailableError, match=r"malformed reply: .* after 3 attempts") as caught:
            await client.complete(REQUEST)
        await client.aclose()
    assert caught.value.transient and len(server.requests) == 3


async def test_a_slow_reply_is_waited_for_with_progress_not_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 43: a local model that is alive and generating was timed out and asked again from the start. With
    `still_waiting_s` (the embedded model's client) a long reply is one attempt, and the log says it is running."""
    with FakeOpenAI([Reply(content="slow but here", delay_s=0.75)]) as server:
        client = OpenAIChatClient(
            config=ModelConfig(base_url=server.base_url, model="fake-model", timeout_s=5.0), still_waiting_s=0.2
        )
        with caplog.at_level("WARNING", logger="debate.llm._openai_client"):
            response = await client.complete(REQUEST)
        await client.aclose()
    assert response.text == "slow but here" and len(server.calls) == 1
    waiting = [r.getMessage() for r in caplog.records if "still generating" in r.getMessage()]
    assert 2 <= len(waiting) <= 4 and "slow, not down" in waiting[0]


async def test_the_embedded_model_gets_a_ceiling_not_a_short_timeout() -> None:
    from debate.llm._embedded import EMBEDDED_STILL_WAITING_S, EMBEDDED_TIMEOUT_S

    assert EMBEDDED_TIMEOUT_S >= 15 * ModelConfig().timeout_s and EMBEDDED_STILL_WAITING_S <= 60
