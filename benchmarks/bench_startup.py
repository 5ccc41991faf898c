"""How long `debate` takes to answer before any work: --version (no engine import) and --help (the whole parser,
plugins included). Prints the median of a few runs of the installed console script.

    python benchmarks/bench_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time


def _time(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["debate", *args], capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    for args in (["--version"], ["--help"], ["verify", "--help"]):
        print(f"debate {' '.join(args):<16} {_time(args, runs):.2f} s (median of {runs})")


if __name__ == "__main__":
    main()
