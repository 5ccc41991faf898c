"""How much slower the guard's verification of one answer runs after its core has rested: bench_guard.py's answer and
sources, verified in process as the guard does (`--debate later --prefilter.prefilters rules`, no model call), over
and over, with nothing between two verifications, with a sleep between them, or with a busy wait of the same length.

A server at 128 requests a second does other work, or none, between two requests. On a host where code that has not
run for a few milliseconds comes back slow (its caches and branch history taken by other work: another machine on
the same physical core, a virtual CPU that was halted), the same code takes longer in the server than in a tight
loop; this prints by how much, which is the part of bench_guard.py's figure that belongs to the host. The busy wait
tells time from rest: when it is as slow as the sleep, the core's rest is not what costs. The kinds of pause take
turns, in rounds, so a drift of the host's speed falls on all of them alike.

    python benchmarks/bench_guard_wake.py
    python benchmarks/bench_guard_wake.py --pauses-ms 1,2,8 --rounds 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from bench_guard import ANSWER, SOURCES, start_upstream

from debate.cli import build_parser
from markov_debate.guard.check import Checker
from markov_debate.guard.cli import settings_from
from markov_debate.guard.core import Guard
from markov_debate.guard.record import Recorder
from markov_debate.guard.sources import read_request
from markov_debate.guard.upstream import Upstream

BODY = {"model": "m", "messages": [{"role": "user", "content": "What is the capital of France?"}], "sources": SOURCES}


def _pause(kind: str, seconds: float) -> None:
    if kind == "sleep":
        time.sleep(seconds)
    elif kind == "busy":
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass


async def _run(args: argparse.Namespace, db: str, judge: str) -> dict[str, list[float]]:
    """`judge` is asked for its models at start, then never again: the deferred team debates nothing, and the rules
    need no model."""
    argv = ["guard", "--upstream", judge, "--db", db, "--debate", "later", "--prefilter.prefilters", "rules"]
    argv += ["--model.base-url", judge, "--model.model", "m"]
    settings = settings_from(build_parser(argv).parse_args(argv))
    checker = Checker(settings.verifier)
    await checker.start({"later"})
    guard = Guard(
        settings=settings, upstream=Upstream(judge, key=None, timeout_s=1), checker=checker, recorder=Recorder(db)
    )
    text, chosen = read_request(BODY), settings.effective(None, None)
    pauses = [("none", 0.0)] + [(kind, ms / 1000) for ms in args.pauses_ms for kind in ("sleep", "busy")]
    times: dict[str, list[float]] = {f"{kind} {s * 1000:g} ms" if s else kind: [] for kind, s in pauses}
    for n in range(args.rounds * args.per_round // 10):  # warm-up
        await guard.verify_answer(text, ANSWER, request_id=f"w{n}", chosen=chosen)
    for _ in range(args.rounds):
        for (kind, seconds), name in zip(pauses, times, strict=True):
            for n in range(args.per_round):
                _pause(kind, seconds)
                started = time.perf_counter()
                await guard.verify_answer(text, ANSWER, request_id=f"r{n}", chosen=chosen)
                times[name].append(time.perf_counter() - started)
    await checker.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pauses-ms", default="2,8", help="the pauses between two verifications, in ms (2,8)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds in which each pause takes its turn (10)")
    parser.add_argument("--per-round", type=int, default=100, help="verifications per pause and round (100)")
    args = parser.parse_args()
    args.pauses_ms = [float(ms) for ms in args.pauses_ms.split(",") if ms.strip()]
    endpoint, judge = start_upstream(0, None)
    try:
        with tempfile.TemporaryDirectory() as folder:
            times = asyncio.run(_run(args, f"sqlite:///{folder}/desk.sqlite", judge))
    finally:
        endpoint.terminate()
        endpoint.wait(timeout=10)
    base = statistics.median(times["none"])
    print(f"one answer's verification, {args.rounds} x {args.per_round} a pause")
    print(f"{'between two':<16} {'p50 ms':>8} {'p90 ms':>8} {'x none':>7}")
    for name, values in times.items():
        p50, p90 = statistics.median(values), statistics.quantiles(values, n=10)[-1]
        print(f"{name:<16} {p50 * 1000:>8.3f} {p90 * 1000:>8.3f} {p50 / base:>7.2f}")


if __name__ == "__main__":
    main()
