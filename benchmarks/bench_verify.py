"""Timing figures for the debate engine. Prints numbers; asserts nothing.

python benchmarks/bench_verify.py overhead --claims 200     # engine cost per turn, no model
python benchmarks/bench_verify.py embedded --repeat 3       # README example on the embedded model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time

from debate import DebateConfig, Verifier, VerifierConfig
from debate.testing import ScriptedChatClient

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
ANSWER = "First for Women"
EVIDENCE = (
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia. First for Women "
    "is a woman's magazine published by Bauer Media Group in the USA. It was started in 1989."
)


async def overhead(claims: int, concurrency: int) -> None:
    reply = json.dumps({"opinion": "ok", "factuality": True, "Error severity": 0})
    client = ScriptedChatClient([reply] * (7 * claims))
    config = VerifierConfig(debate=DebateConfig(), concurrency=concurrency)
    started = time.perf_counter()
    async with Verifier(config=config, client=client) as verifier:
        reports = await asyncio.gather(
            *(verifier.verify(ANSWER, question=QUESTION, reference=EVIDENCE) for _ in range(claims))
        )
    wall = time.perf_counter() - started
    turns = sum(r.usage.llm_calls for r in reports)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"engine overhead: {claims} claims, {turns} turns in {wall:.2f}s -> {1000 * wall / turns:.2f} ms/turn, "
        f"{claims / wall:.1f} claims/s; peak RSS {rss_mb:.0f} MiB"
    )


async def embedded(repeat: int) -> None:
    started = time.perf_counter()
    async with Verifier(config=VerifierConfig()) as verifier:
        startup = time.perf_counter() - started
        print(f"embedded server start-up: {startup:.2f}s ({verifier.client.model_name})")
        for i in range(repeat):
            t0 = time.perf_counter()
            report = await verifier.verify(ANSWER, question=QUESTION, reference=EVIDENCE)
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
