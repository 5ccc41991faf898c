"""Timing figures for the debate engine. Prints numbers; asserts nothing.

python benchmarks/bench_verify.py overhead --claims 200     # CPU per turn: engine, autogen's share, HTTP client
python benchmarks/bench_verify.py embedded --repeat 3       # README example on the embedded model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import Response
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import BaseChatMessage, TextMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core import CancellationToken

from agents.selector_model import NoSelectorModel
from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.llm import ChatMessage, ChatRequest, OpenAIChatClient
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
ANSWER = "First for Women"
EVIDENCE = (
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia. First for Women "
    "is a woman's magazine published by Bauer Media Group in the USA. It was started in 1989."
)


async def _pipeline_cpu(claims: int, concurrency: int) -> tuple[float, int, float]:
    """CPU seconds, turns and wall seconds for `claims` QA debates on a scripted client (no HTTP)."""
    reply = json.dumps({"opinion": "ok", "factuality": True, "Error severity": 0})
    client = ScriptedChatClient([reply] * (7 * claims))
    config = VerifierConfig(debate=DebateConfig(), claim_concurrency=concurrency)
    async with Verifier(config=config, client=client) as verifier:
        cpu, wall = time.process_time(), time.perf_counter()
        reports = await asyncio.gather(
            *(verifier.verify(TaskInput(ANSWER, question=QUESTION, reference=EVIDENCE)) for _ in range(claims))
        )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, sum(r.usage.llm_calls for r in reports), wall


class _Echo(BaseChatAgent):
    """An agent that answers at once: what autogen's group chat itself costs per turn."""

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TextMessage,)

    async def on_messages(self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken) -> Response:
        return Response(chat_message=TextMessage(content="ok", source=self.name))

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        return None


async def _bare_autogen_cpu(chats: int, concurrency: int) -> tuple[float, int]:
    """CPU seconds and turns of `chats` SelectorGroupChats of 4 trivial agents, 7 turns each (like one debate)."""
    order = ["a0", "a1", "a2", "a3", "a1", "a2", "a3"]
    gate = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with gate:
            team = SelectorGroupChat(
                [_Echo(f"a{i}", description="echo") for i in range(4)],
                model_client=NoSelectorModel(),
                selector_func=lambda thread: order[len(thread) - 1],
                allow_repeated_speaker=True,
                termination_condition=MaxMessageTermination(8),
            )
            result = await team.run(task=TextMessage(content="claim", source="user"))
            return len(result.messages) - 1

    cpu = time.process_time()
    turns = sum(await asyncio.gather(*(one() for _ in range(chats))))
    return time.process_time() - cpu, turns


async def _http_client_cpu(calls: int, concurrency: int) -> tuple[float, float]:
    """CPU seconds and wall seconds of `calls` OpenAIChatClient calls to a 0 ms fake endpoint in another process."""
    fake = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).with_name("fake_endpoint.py")), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert fake.stdout is not None
        port = int((await fake.stdout.readline()).split()[1])
        config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="fake-model", max_concurrency=concurrency)
        client = OpenAIChatClient(config=config)
        request = ChatRequest(messages=[ChatMessage(role="system", content="s"), ChatMessage(role="user", content="u")])
        await asyncio.gather(*(client.complete(request) for _ in range(20)))  # connections and imports warm
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                await client.complete(request)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await client.aclose()
        return cpu, wall
    finally:
        fake.terminate()
        await fake.wait()


async def overhead(claims: int, concurrency: int) -> None:
    await _pipeline_cpu(10, concurrency)  # imports and first-use costs out of the way
    cpu, turns, wall = await _pipeline_cpu(claims, concurrency)
    bare_cpu, bare_turns = await _bare_autogen_cpu(claims, concurrency)
    http_cpu, http_wall = await _http_client_cpu(turns, concurrency)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_turn = 1000 * cpu / turns
    autogen = 1000 * bare_cpu / bare_turns
    print(
        f"pipeline on a scripted client: {claims} claims, {turns} turns, {wall:.2f}s wall, {claims / wall:.1f} claims/s"
    )
    print(f"  CPU per turn, everything: {per_turn:.2f} ms")
    print(f"  of which autogen's group chat itself (4 trivial agents, same turns): {autogen:.2f} ms")
    print(f"  of which the engine's own code: {per_turn - autogen:.2f} ms")
    print(
        f"HTTP client (OpenAIChatClient, 0 ms fake endpoint in another process): {1000 * http_cpu / turns:.2f} ms CPU "
        f"per call, {turns / http_wall:.0f} calls/s"
    )
    print(f"peak RSS {rss_mb:.0f} MiB")


async def embedded(repeat: int) -> None:
    started = time.perf_counter()
    async with Verifier(config=VerifierConfig()) as verifier:
        startup = time.perf_counter() - started
        print(f"embedded server start-up: {startup:.2f}s ({verifier.client.model_name})")
        for i in range(repeat):
            t0 = time.perf_counter()
            report = await verifier.verify(TaskInput(ANSWER, question=QUESTION, reference=EVIDENCE))
            wall = time.perf_counter() - t0
            latencies = [t.call.latency_s for s in report.claims[0].debate.states for t in s.turns]  # type: ignore[union-attr]
            u = report.usage
            print(
                f"run {i + 1}: {wall:.1f}s, verdict {report.verdict}, {u.llm_calls} calls, "
                f"{statistics.mean(latencies):.2f}s/call (max {max(latencies):.2f}s), "
                f"{u.prompt_tokens / u.llm_calls:.0f} prompt + "
                f"{u.completion_tokens / u.llm_calls:.0f} completion tokens/call"
            )
    print(f"total including start-up and shutdown: {time.perf_counter() - started:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="which", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--claims", type=int, default=200)
    o.add_argument("--concurrency", type=int, default=8)
    e = sub.add_parser("embedded")
    e.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.which == "overhead":
        asyncio.run(overhead(args.claims, args.concurrency))
    else:
        asyncio.run(embedded(args.repeat))


if __name__ == "__main__":
    main()
