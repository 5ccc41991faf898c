"""Direct tests of the small modules every stage leans on: the re-ask loop (debate.engine), the registry, the
concurrency cap (debate.concurrency) and the team's selector model (agents.selector_model)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import itertools
import json
import time
import warnings
from typing import Any

import pytest

from agents.selector_model import NoSelectorModel
from debate.calls import ask_structured, converse, load_prompt
from debate.concurrency import EAGER_SLICE_S, gather_ordered, ordered_map, run_blocking, start_eagerly
from debate.errors import InternalError, ModelUnavailableError, ReplyUnusableError, UsageError
from debate.llm import item_scope
from debate.registry import Registry, UnknownNameError
from debate.testing import ScriptedChatClient


def _number(reply: str) -> int:
    try:
        return int(json.loads(reply)["n"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplyUnusableError(f"no integer n in {reply!r}") from exc


# --- debate.engine ------------------------------------------------------------------------------------------


async def test_a_malformed_reply_is_re_asked_with_its_error_in_the_same_conversation() -> None:
    client = ScriptedChatClient({"count": ["seven", '{"n": 7}']})
    chat = converse(client, "You count.", schema=None, schema_name="n", purpose="count", site="x")
    outcome = await ask_structured(chat, "How many?", _number, max_retries=2, expected='{"n": <integer>}')
    assert (outcome.value, outcome.attempts, outcome.errors) == (7, 2, ["no integer n in 'seven'"])
    second = client.calls[1].request
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
    assert (
        "no integer n in 'seven'" in second.messages[-1].content and '{"n": <integer>}' in second.messages[-1].content
    )
    assert [c.request.site for c in client.calls] == ["x#1", "x#2"]
    # Usage comes back on the outcome; only the usable reply is offered to a call cache.
    assert outcome.usage.llm_calls == 2 and outcome.usage.prompt_tokens == 20
    assert [r.text for r in client.accepted] == ['{"n": 7}']
    info = outcome.info(load_prompt("reask"), chat.messages())
    assert info.attempts == 2 and info.usage.llm_calls == 2 and info.messages is not None and len(info.messages) == 5


async def test_the_re_asks_are_bounded_and_the_outcome_says_why_it_failed() -> None:
    client = ScriptedChatClient({"count": ["a", "b", "c"]})
    chat = converse(client, "", schema=None, schema_name="n", purpose="count")
    outcome = await ask_structured(chat, "How many?", _number, max_retries=2, expected="n")
    assert outcome.value is None and outcome.attempts == 3 and client.remaining == 0 and client.accepted == []
    assert outcome.failure == "no usable reply after 3 attempts; last problem: no integer n in 'c'"
    with pytest.raises(ReplyUnusableError, match="after 3 attempts"):
        outcome.unwrap()


async def test_a_network_failure_is_not_re_asked() -> None:
    client = ScriptedChatClient({"count": [ModelUnavailableError("HTTP 503"), '{"n": 1}']})
    chat = converse(client, "", schema=None, schema_name="n", purpose="count")
    with pytest.raises(ModelUnavailableError):
        await ask_structured(chat, "How many?", _number, max_retries=2, expected="n")
    assert client.remaining == 1 and len(chat.responses) == 0


# --- debate.registry --------------------------------------------------------------------------------------------


def test_registry_names_describes_and_suggests() -> None:
    class Square:
        """A square widget.

        More about it."""

    registry: Registry[type] = Registry("widgets")
    registry.register("round", int, description="a round widget")
    registry.register("square", Square)
    assert registry.names() == ["round", "square"] and list(registry) == ["round", "square"]
    assert registry.get("round") is int and "square" in registry and "oval" not in registry
    assert registry.describe("round") == "a round widget" and registry.describe("square") == "A square widget."
    with pytest.raises(UnknownNameError, match=r"unknown widget 'rund' \(known: round, square\); did you mean 'round'"):
        registry.get("rund")
    registry.register("round", str)  # a later registration replaces the earlier one
    assert registry.get("round") is str


def test_registry_loads_a_plugin_through_its_entry_point() -> None:
    from debate.plugins import PREFILTERS

    assert "rules" in PREFILTERS.names()
    with pytest.raises(UnknownNameError, match="did you mean 'rules'"):
        PREFILTERS.get("rulez")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"rollup": "majorty"},
            "rollup: unknown rollup 'majorty' (known: any-false, major, soft, strict); did you mean",
        ),
        ({"team": "autogn"}, "team: unknown team 'autogn'"),
        ({"retrieval": {"retriever": "bm52"}}, "retrieval.retriever: unknown retriever 'bm52'"),
        ({"prefilter": {"prefilters": ["rulez"]}}, "prefilter.prefilters: unknown prefilter 'rulez'"),
        ({"debate": {"chain": "true-to-skeptik"}}, "debate.chain: unknown chain 'true-to-skeptik'"),
    ],
)
def test_a_name_nothing_registered_stops_the_verifier_being_built(config: dict[str, object], expected: str) -> None:
    """The configuration holds names; the registries are asked when a Verifier is built, with the field named and
    the closest registered name."""
    from debate import Verifier, VerifierConfig

    with pytest.raises(UnknownNameError) as caught:
        Verifier(config=VerifierConfig.model_validate(config), client=ScriptedChatClient([]))
    assert str(caught.value).startswith(expected)


# --- debate.concurrency -----------------------------------------------------------------------------------------


async def test_results_come_in_input_order_with_at_most_limit_running() -> None:
    running, most = 0, 0

    async def work(i: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (10 - i))  # later items finish first
        running -= 1
        return i * i

    assert await gather_ordered(range(10), work, limit=3) == [i * i for i in range(10)]
    assert most == 3
    with pytest.raises(UsageError, match="limit must be at least 1"):
        await gather_ordered([1], work, limit=0)


@pytest.mark.parametrize("sigterm_cancels", [False, True])
def test_run_blocking_closes_a_coroutine_a_ctrl_c_kept_from_starting(
    monkeypatch: pytest.MonkeyPatch, sigterm_cancels: bool
) -> None:
    """A Ctrl-C that lands before the loop starts the coroutine: no "never awaited" warning after the CLI's
    one-line message (it printed one in CI), with SIGTERM cancelling the work (the CLI's setting) or not."""
    import debate.concurrency

    monkeypatch.setattr(debate.concurrency, "_SIGTERM_CANCELS", sigterm_cancels)
    started: list[bool] = []

    async def work() -> int:
        started.append(True)
        return 1

    def interrupted(coroutine: object) -> int:
        raise KeyboardInterrupt

    assert run_blocking(work()) == 1 and started == [True]
    monkeypatch.setattr(asyncio, "run", interrupted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            run_blocking(work())
        gc.collect()
    assert started == [True]
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


async def test_a_failure_cancels_the_work_still_running_and_surfaces_in_order() -> None:
    cancelled: list[int] = []

    async def work(i: int) -> int:
        try:
            if i == 1:
                raise KeyError("item 1")
            await asyncio.sleep(0.05 if i == 0 else 10)
            return i
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    seen: list[int] = []
    with pytest.raises(KeyError, match="item 1"):
        async for result in ordered_map(range(5), work, limit=2):
            seen.append(result)
    # Item 0's result was due first; item 1's error then surfaced and the items already running were cancelled.
    assert seen == [0] and sorted(cancelled) == [2, 3]


async def test_cancelling_the_caller_cancels_every_task() -> None:
    started: list[int] = []
    finished: list[int] = []

    async def work(i: int) -> int:
        started.append(i)
        await asyncio.sleep(10)
        finished.append(i)
        return i

    task = asyncio.ensure_future(gather_ordered(range(6), work, limit=2))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # A queued item may get the slot a cancelled one frees, but it is cancelled at its first await.
    assert started[:2] == [0, 1] and len(started) <= 3 and finished == []
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_the_item_scope_reaches_the_tasks_work_starts() -> None:
    client = ScriptedChatClient({"x@a": ["1", "2"], "x@b": ["3"]})

    async def ask(text: str) -> str:
        from debate.llm import ChatMessage, ChatRequest

        return (await client.complete(ChatRequest(messages=[ChatMessage(role="user", content=text)], purpose="x"))).text

    with item_scope("a"):
        first = await gather_ordered(["p", "q"], ask, limit=2)
    with item_scope("b"):
        second = await ask("r")
    assert (first, second) == (["1", "2"], "3") and [c.item for c in client.calls] == ["a", "a", "b"]


async def test_work_that_never_waits_is_done_when_started_and_work_that_waits_is_its_own_task() -> None:
    """A claim the cheap checks decide finishes without a trip around the event loop; work that waits gets its
    own task from its first step on: a timeout it enters there cancels it, not its caller."""
    loop_turns = 0

    def count_turn() -> None:
        nonlocal loop_turns
        loop_turns += 1

    async def at_once(i: int) -> int:
        return i * 10

    inside: list[asyncio.Task[Any] | None] = []

    async def waits() -> None:
        inside.append(asyncio.current_task())
        async with asyncio.timeout(0.01):
            await asyncio.sleep(10)

    asyncio.get_running_loop().call_soon(count_turn)
    done = start_eagerly(at_once(4))
    assert done.done() and done.result() == 40
    assert await gather_ordered(range(5), at_once, limit=2) == [0, 10, 20, 30, 40] and loop_turns == 0
    caller = asyncio.current_task()
    waiting = start_eagerly(waits())
    assert not waiting.done() and asyncio.current_task() is caller and inside == [waiting]
    with pytest.raises(TimeoutError):
        await waiting
    assert not caller.cancelling()  # type: ignore[union-attr]


async def test_a_long_run_of_work_that_never_waits_still_lets_the_event_loop_turn() -> None:
    """Eager work must not hold the loop for a whole batch: another request, a signal handler or a Ctrl-C's
    cancellation waits at most about EAGER_SLICE_S."""
    started: list[int] = []
    turns_at: list[int] = []

    async def busy(i: int) -> int:
        started.append(i)
        until = time.perf_counter() + EAGER_SLICE_S / 4
        while time.perf_counter() < until:
            pass
        return i

    def turn() -> None:
        turns_at.append(len(started))
        if len(started) < 40:
            asyncio.get_running_loop().call_soon(turn)

    asyncio.get_running_loop().call_soon(turn)
    assert await gather_ordered(range(40), busy, limit=4) == list(range(40))
    # The loop turned within the batch, each time after about four items' work (never after the whole of it).
    within = [n for n in turns_at if 0 < n < 40]
    assert len(within) >= 5 and all(b - a <= 8 for a, b in itertools.pairwise([0, *within]))


async def test_eager_work_keeps_its_own_context_and_its_failure_for_when_it_is_due() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="caller")
    seen: list[str] = []

    async def sets_and_fails(i: int) -> int:
        marker.set(f"item {i}")
        seen.append(marker.get())
        if i == 1:
            raise ValueError("item 1 is bad")
        return i

    failed = start_eagerly(sets_and_fails(1))
    assert failed.done() and marker.get() == "caller" and seen == ["item 1"]
    with pytest.raises(ValueError, match="item 1 is bad"):
        await failed
    results: list[int] = []
    with pytest.raises(ValueError, match="item 1 is bad"):
        async for result in ordered_map(range(3), sets_and_fails, limit=4):
            results.append(result)
    assert results == [0] and marker.get() == "caller"


async def test_cancelling_eager_work_that_waits_unwinds_it() -> None:
    unwound: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            unwound.append("finally ran")

    for turn_first in (True, False):  # cancelled once its task has taken a step, and before it has
        unwound.clear()
        task = start_eagerly(waits())
        if turn_first:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert unwound == ["finally ran"]

    def interrupt() -> None:
        raise KeyboardInterrupt

    async def interrupted() -> None:
        interrupt()

    with pytest.raises(KeyboardInterrupt):
        start_eagerly(interrupted())
    assert asyncio.current_task() is not None


# --- agents.selector_model --------------------------------------------------------------------------------------


async def test_the_selector_model_refuses_every_call() -> None:
    model = NoSelectorModel()
    with pytest.raises(InternalError, match="the Markov chain names every speaker"):
        await model.create([])
    with pytest.raises(InternalError, match="never asked"):
        async for _ in model.create_stream([]):
            pass
    assert model.total_usage().prompt_tokens == 0 and model.model_info["function_calling"] is False


# --- per-prefilter options --------------------------------------------------------------------------------------


def test_stage_options_are_checked_against_the_stage_s_own_model() -> None:
    """Built-in prefilters and tasks declare their options the way plugins do; checked when a Verifier is built
    (configuration imports no stage), with the field named."""
    from debate import Verifier, VerifierConfig
    from debate.config import PrefilterConfig
    from debate.errors import UsageError
    from debate.registry import UnknownNameError

    def build(**fields: object) -> None:
        Verifier(config=VerifierConfig(**fields), client=ScriptedChatClient([]))

    rules = PrefilterConfig(prefilters=["rules"], options={"rules": {"strict": True}})
    with pytest.raises(UsageError, match=r"^prefilter.options.rules: strict: Extra inputs are not permitted"):
        build(prefilter=rules)
    with pytest.raises(UsageError, match=r"^task_options: task 'qa' takes no options"):
        build(task_options={"qa": {"strict": True}})
    with pytest.raises(UsageError, match=r"^task_options.rag: citation_variant: Input should be 'seed' or"):
        build(task_options={"rag": {"citation_variant": "both"}})
    with pytest.raises(UnknownNameError, match=r"^task_options: unknown task 'rags'.*did you mean 'rag'"):
        build(task_options={"rags": {}})
    build(task_options={"rag": {"citation_variant": "occurrences"}})
    assert PrefilterConfig(prefilters=["rules"]).options == {}
