"""Simulated runs recorded once and read by every test that needs them.

A dynamics test fits and checks populations run through the real engine (experiments.dynamics.simulate); the runs
cost about 20 ms a claim, and several modules read the same ones. Each run is recorded in
tests/fixtures/dynamics/NAME.jsonl.gz: a header line with everything that made it (the population, the chain, the
rounds, the labels) and a line per claim with its turns and how its debate ended. `recorded(spec)` reads it, or
runs the engine and records it when it is missing or was made by another spec (a changed population is never read
from an old file).

The engine can change under a recording: tests/experiments/test_recorded_runs.py runs a spread of every file's claims
through the engine again and requires the same turns. Each claim's draws are seeded by its own id, so a claim's
transcript does not depend on which others run beside it. After a change to the engine's behaviour, record again:
`DEBATE_RECORD=1 python -m pytest tests/experiments -m slow -k "dynamics or recorded"` (every file the tests read
is written anew; the command docs/development.md gives).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debate.engine import load_chain
from experiments.dynamics import Observation, observations
from experiments.dynamics.simulate import Final, Population, labels_for, simulate_debates
from tests.support.helpers import ROOT

RECORDED = ROOT / "tests" / "fixtures" / "dynamics"
FORMAT = 1


@dataclass(frozen=True)
class RunSpec:
    """One simulated run: a population's debates on `n` labelled claims under one chain and round limits."""

    name: str
    """The file's name (tests/fixtures/dynamics/NAME.jsonl.gz)."""
    population: Population
    chain: str
    min_rounds: int
    max_rounds: int
    n: int
    share: float = 0.5
    labels_seed: int = 1
    prefix: str = "sim"

    def labels(self) -> dict[str, bool]:
        return labels_for(self.n, self.share, self.labels_seed, prefix=self.prefix)

    def header(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "population": self.population.model_dump(mode="json"),
            "chain": self.chain,
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "n": self.n,
            "share": self.share,
            "labels_seed": self.labels_seed,
            "prefix": self.prefix,
        }

    @classmethod
    def from_header(cls, name: str, header: dict[str, Any]) -> RunSpec:
        fields = {k: v for k, v in header.items() if k not in ("format", "population")}
        return cls(name=name, population=Population.model_validate(header["population"]), **fields)

    def simulate(self, labels: dict[str, bool] | None = None) -> Recording:
        """The run through the real engine (`labels`: a part of the run's claims)."""
        results = asyncio.run(
            simulate_debates(
                self.population,
                chain=self.chain,
                min_rounds=self.min_rounds,
                max_rounds=self.max_rounds,
                labels=self.labels() if labels is None else labels,
            )
        )
        spec = load_chain(self.chain)
        seen = [o for item, label, r in results for o in observations(r, spec, item=item, label=label)]
        ends = {
            item: (r.final.factuality if r.final is not None else None, r.usage.llm_calls) for item, _, r in results
        }
        return Recording(seen, ends)


@dataclass(frozen=True)
class Recording:
    """A run's turns, and each claim's end: its final verdict (None: no verdict) and model calls."""

    seen: list[Observation]
    ends: dict[str, tuple[bool | None, int]]

    def finals(self, labels: dict[str, bool]) -> list[Final]:
        """The debates that reached a verdict, as experiments.dynamics.simulate.finals gives them."""
        return [(labels[item], final, calls) for item, (final, calls) in self.ends.items() if final is not None]


def _path(name: str) -> Path:
    return RECORDED / f"{name}.jsonl.gz"


def _turn(o: Observation) -> list[Any]:
    shown = "".join("T" if v else "F" for v in o.shown)
    return [o.role, o.state, shown, o.earlier, o.verdict, o.calls, o.position, o.initial]


def _observation(item: str, label: bool | None, turn: list[Any]) -> Observation:
    role, state, shown, earlier, verdict, calls, position, initial = turn
    return Observation(
        item=item,
        label=label,
        role=role,
        state=state,
        shown=tuple(c == "T" for c in shown),
        earlier=earlier,
        verdict=verdict,
        calls=calls,
        position=position,
        initial=initial,
    )


def write(spec: RunSpec, run: Recording) -> None:
    by_item: dict[str, list[Observation]] = {}
    for o in run.seen:
        by_item.setdefault(o.item, []).append(o)
    lines = [json.dumps(spec.header(), sort_keys=True)]
    for item, label in spec.labels().items():
        turns = [_turn(o) for o in by_item.get(item, [])]
        final, calls = run.ends[item]
        lines.append(json.dumps({"item": item, "label": label, "final": final, "calls": calls, "turns": turns}))
    RECORDED.mkdir(parents=True, exist_ok=True)
    # written whole, then moved into place: two test processes recording the same run never leave half a file
    with tempfile.NamedTemporaryFile(dir=RECORDED, suffix=".tmp", delete=False) as out:
        out.write(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    os.chmod(out.name, 0o644)
    os.replace(out.name, _path(spec.name))


def read(name: str) -> tuple[RunSpec, Recording]:
    """A recorded run: the spec that made it, and its turns and ends in the claims' order."""
    with gzip.open(_path(name), "rt") as lines:
        header = json.loads(next(lines))
        seen: list[Observation] = []
        ends: dict[str, tuple[bool | None, int]] = {}
        for line in lines:
            claim = json.loads(line)
            seen.extend(_observation(claim["item"], claim["label"], turn) for turn in claim["turns"])
            ends[claim["item"]] = (claim["final"], claim["calls"])
    return RunSpec.from_header(name, header), Recording(seen, ends)


def names() -> list[str]:
    """Every recorded run."""
    return sorted(p.name.removesuffix(".jsonl.gz") for p in RECORDED.glob("*.jsonl.gz"))


def recorded_run(spec: RunSpec) -> Recording:
    """The run, from its recording; run and recorded when it is missing, made by another spec, or
    DEBATE_RECORD=1."""
    if os.environ.get("DEBATE_RECORD") != "1" and _path(spec.name).exists():
        made_by, run = read(spec.name)
        if made_by == spec:
            return run
    run = spec.simulate()
    write(spec, run)
    return run


def recorded(spec: RunSpec) -> list[Observation]:
    """The run's turns (`recorded_run`)."""
    return recorded_run(spec).seen
