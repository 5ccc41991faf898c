"""Where the suite's time goes, from pytest's --junitxml: seconds by folder and by what the tests start.

    python .ci/durations.py junit.xml                    # one run
    python .ci/durations.py after.xml --before before.xml  # two runs side by side (the same test ids)

A test's seconds are its setup, call and teardown (junitxml's default), summed over all workers, so with several
workers the sum is larger than the wall time; its CPU seconds are its process's and its waited-for children's (a run
recorded without them shows "-"). "What the tests start" is the `starts` property that
tests/support/timing.py records; each test is counted once, under the heaviest kind it started (the order of
PRECEDENCE), so each table adds up to the suite's total. A run recorded without that property (an older commit)
borrows the kinds of the same test ids from the other run.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

GROUP_SUFFIX = re.compile(r"@[^\[\]]*$")

PRECEDENCE = [
    "embedded model",
    "Chromium",
    "Phoenix",
    "schemathesis",
    "nginx",
    "PostgreSQL",
    "debate command",
    "pip, mkdocs, pytest, inspect",
    "other processes",
    "worker processes (multiprocessing)",
    "desk (in process)",
    "guard (in process)",
    "scripted endpoint (in process)",
    "hypothesis",
    "nothing",
]


class Run:
    """One junit file: each test id's seconds, the kinds it started and its CPU seconds, and the run's wall time."""

    def __init__(self, path: Path) -> None:
        self.seconds: dict[str, float] = {}
        self.kinds: dict[str, list[str]] = {}
        self.cpu: dict[str, float] = {}
        self.wall = 0.0
        root = ET.parse(path).getroot()
        for suite in root.iter("testsuite"):
            self.wall = max(self.wall, float(suite.get("time", 0)))
        for case in root.iter("testcase"):
            # xdist's loadgroup names a grouped test "name@group": the same test as "name" in a serial run
            test = GROUP_SUFFIX.sub("", f"{case.get('classname', '')}::{case.get('name', '')}")
            self.seconds[test] = self.seconds.get(test, 0.0) + float(case.get("time", 0))
            for prop in case.iter("property"):
                if prop.get("name") == "starts":
                    self.kinds[test] = (prop.get("value") or "nothing").split(";")
                elif prop.get("name") == "cpu":
                    self.cpu[test] = float(prop.get("value") or 0)

    def primary(self, test: str, other: Run | None) -> str:
        kinds = self.kinds.get(test) or (other.kinds.get(test) if other else None)
        if not kinds:
            return "unknown"
        return min(kinds, key=lambda k: PRECEDENCE.index(k) if k in PRECEDENCE else len(PRECEDENCE))


def folder(test: str) -> str:
    parts = test.split("::")[0].split(".")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else parts[0] + "/"


def _cpu(run: Run, seconds: float) -> str:
    return f"{seconds:.0f}" if run.cpu else "-"


def table(title: str, runs: list[tuple[str, Run]], key: str) -> list[str]:
    """Markdown rows: per group (folder, or heaviest kind started), each run's tests, seconds and CPU seconds."""
    sums: list[dict[str, float]] = []
    cpus: list[dict[str, float]] = []
    counts: list[dict[str, int]] = []
    for i, (_, run) in enumerate(runs):
        other = runs[1 - i][1] if len(runs) == 2 else None
        s: dict[str, float] = defaultdict(float)
        cpu: dict[str, float] = defaultdict(float)
        c: dict[str, int] = defaultdict(int)
        for test, seconds in run.seconds.items():
            group = folder(test) if key == "folder" else run.primary(test, other)
            s[group] += seconds
            cpu[group] += run.cpu.get(test, 0.0)
            c[group] += 1
        sums.append(s)
        cpus.append(cpu)
        counts.append(c)
    groups = sorted({g for s in sums for g in s}, key=lambda g: -max(s.get(g, 0) for s in sums))
    head = f"| {title} | " + " | ".join(f"{name}: tests | {name}: s | {name}: CPU s" for name, _ in runs) + " |"
    rows = [head, "| --- |" + " ---: | ---: | ---: |" * len(runs)]
    for g in groups:
        cells = " | ".join(
            f"{c.get(g, 0)} | {s.get(g, 0):.0f} | {_cpu(run, u.get(g, 0))}"
            for s, u, c, (_, run) in zip(sums, cpus, counts, runs, strict=True)
        )
        rows.append(f"| {g} | {cells} |")
    totals = " | ".join(
        f"{len(run.seconds)} | {sum(run.seconds.values()):.0f} | {_cpu(run, sum(run.cpu.values()))}" for _, run in runs
    )
    rows.append(f"| **all** | {totals} |")
    return rows


BUDGET_S = 1500
"""The CI's budget for a clean checkout's `bash .ci/run` on 2 cores (docs/development.md)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path, help="the run's --junitxml file")
    parser.add_argument("--before", type=Path, help="an earlier run's --junitxml file, shown first")
    args = parser.parse_args(argv)
    runs = [("before", Run(args.before))] if args.before else []
    runs.append(("after" if args.before else "run", Run(args.junit)))
    out = [*table("folder", runs, "folder"), "", *table("starts", runs, "kind"), ""]
    out.append(
        "Seconds are setup + call + teardown, summed over workers. Wall time of the run: "
        + ", ".join(f"{name} {run.wall:.0f} s" for name, run in runs)
    )
    suite = runs[-1][1].wall
    out.append(
        f"The suite took {suite:.0f} s, {suite / BUDGET_S:.0%} of the CI's {BUDGET_S // 60}-minute budget for the "
        "whole of .ci/run (set-up, install and lint share it; .ci/run prints the total)."
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
