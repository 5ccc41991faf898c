"""Does `--rpm` hold across worker processes? Prints figures; asserts nothing.

    python benchmarks/bench_rate_limit.py                          # --rpm 300, 2 workers, a 30 s window
    python benchmarks/bench_rate_limit.py --rpm 600 --workers 2 --seconds 30 --latency-ms 50

A batch of HaluEval-style QA items runs through `debate verify --workers N --rpm R` against `fake_endpoint.py`
(its own process, fast replies), sized to keep the endpoint busy past the window. From the endpoint's record of
each request's arrival, the rate over the window (starting 2 s after the first request, so start-up is left out)
is compared with R, and the busiest 10-second stretch is shown beside it. With `--compare`, the same batch without
`--rpm` shows what the workers send unlimited.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS_PER_ITEM = 7  # S0 and one state of three agents, twice (min rounds 2), when they agree as the fake makes them


def _run(rpm: int | None, workers: int, items: int, latency_ms: float, concurrency: int) -> list[float]:
    fake = subprocess.Popen(
        [sys.executable, str(HERE / "fake_endpoint.py"), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake.stdout is not None
    port = int(fake.stdout.readline().split()[1])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "items.jsonl"
            source.write_text(
                "".join(
                    json.dumps(
                        {
                            "id": f"q{k}",
                            "question": f"Question {k}?",
                            "response": "An answer.",
                            "reference": "Some knowledge.",
                        }
                    )
                    + "\n"
                    for k in range(items)
                )
            )
            command = [
                sys.executable,
                "-m",
                "debate.cli",
                "verify",
                "--input",
                str(source),
                "--output",
                str(Path(tmp) / "out.jsonl"),
                "--model.base-url",
                f"http://127.0.0.1:{port}/v1",
                "--workers",
                str(workers),
                "--model.max-concurrency",
                str(concurrency),
            ]
            if rpm is not None:
                command += ["--model.requests-per-minute", str(rpm)]
            subprocess.run(command, check=True, capture_output=True, text=True)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
            arrivals: list[float] = json.loads(response.read())["arrivals"]
        return sorted(arrivals)
    finally:
        fake.terminate()
        fake.wait()


def _window_rate(arrivals: list[float], start: float, seconds: float) -> float:
    return sum(1 for t in arrivals if start <= t < start + seconds) / seconds * 60


def _busiest(arrivals: list[float], seconds: float) -> float:
    return max(sum(1 for t in arrivals if a <= t < a + seconds) for a in arrivals) / seconds * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured window (default: 30)")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--compare", action="store_true", help="also run the batch without --rpm")
    args = parser.parse_args()
    calls = args.rpm * (args.seconds + 10) / 60  # 2 s of start-up, the window, and some to spare
    items = math.ceil(calls / CALLS_PER_ITEM)
    print(
        f"{items} items x {CALLS_PER_ITEM} calls, --workers {args.workers} --concurrency {args.concurrency}, "
        f"fake latency {args.latency_ms:g} ms"
    )
    began = time.perf_counter()
    arrivals = _run(args.rpm, args.workers, items, args.latency_ms, args.concurrency)
    wall = time.perf_counter() - began
    rate = _window_rate(arrivals, arrivals[0] + 2.0, args.seconds)
    off = (rate - args.rpm) / args.rpm
    busiest = _busiest(arrivals, 10.0)
    print(
        f"--rpm {args.rpm}: {len(arrivals)} requests in {wall:.1f} s; over a {args.seconds:g} s window "
        f"{rate:.1f} requests/min ({off:+.1%} from the limit); busiest 10 s {busiest:.1f}/min"
    )
    if args.compare:
        free = _run(None, args.workers, items, args.latency_ms, args.concurrency)
        span = max(free[-1] - free[0], 1e-9)
        print(f"without --rpm: {len(free)} requests in {span:.1f} s = {len(free) / span * 60:.0f} requests/min")


if __name__ == "__main__":
    main()
