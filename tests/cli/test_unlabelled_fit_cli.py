"""A calibration from a results log, as a team without a labelled set makes one: `debate verify --input batch.jsonl
--output log.jsonl` (a few lines carrying `label_factual`) against a simulated population served on 127.0.0.1, then
`debate dynamics fit log.jsonl --save cal.json`, then a verdict scored with it (`--calibration`, `--prior`)."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from debate.engine import load_chain
from experiments.dynamics.endpoint import population_endpoint
from experiments.dynamics.examples import EXAMPLES
from experiments.dynamics.simulate import SimulatedAgents, labels_for
from tests.support.helpers import debate

pytestmark = pytest.mark.slow  # starts processes

LABELS = labels_for(300, 0.5, 1)
LABELLED = 40
"""Lines of the batch that carry their label: over the 30 (both labels present) a fit needs to let labels decide."""


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The markov population answering on 127.0.0.1 in a thread of its own."""
    agents = SimulatedAgents(EXAMPLES["markov"], load_chain("true-to-skeptic"), LABELS)
    loop = asyncio.new_event_loop()
    ready: list[str] = []
    stop = asyncio.Event()
    started = threading.Event()

    async def serve() -> None:
        async with population_endpoint(agents) as url:
            ready.append(url)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(30)
    yield ready[0]
    loop.call_soon_threadsafe(stop.set)
    thread.join(30)


def _line(item: str, labelled: bool) -> str:
    line: dict[str, object] = {"id": item, "question": "a question", "response": "an answer", "reference": "knowledge"}
    if labelled:
        line["label_factual"] = LABELS[item]
    return json.dumps(line)


def _url(endpoint: str) -> tuple[str, ...]:
    return ("--model.base-url", endpoint, "--model.model", "simulated", "--debate.max-rounds", "4")


def test_a_batch_with_a_few_labels_becomes_a_calibration_and_a_verdict_carries_it(
    endpoint: str, tmp_path: Path
) -> None:
    batch, log = tmp_path / "batch.jsonl", tmp_path / "log.jsonl"
    batch.write_text("\n".join(_line(item, i < LABELLED) for i, item in enumerate(LABELS)) + "\n")
    done = debate("verify", "--input", str(batch), "--output", str(log), "--task", "qa", *_url(endpoint), timeout=600)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum("label_factual" in r for r in records) == LABELLED  # kept in the result records
    # the same log with every label taken out: what a team with no labelled claim at all has
    blind = tmp_path / "blind.jsonl"
    blind.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "label_factual"}) + "\n" for r in records))

    # a log resumed under other settings is refused, naming the record, rather than fitted as one run
    mixed = [dict(r) for r in records]
    mixed[5] = {**mixed[5], "result": {**mixed[5]["result"]}}
    meta = {**mixed[5]["result"]["meta"], "config": {**mixed[5]["result"]["meta"]["config"]}}
    meta["config"]["debate"] = {**meta["config"]["debate"], "max_rounds": 5}
    mixed[5]["result"]["meta"] = meta
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mixed))
    refused = debate("dynamics", "fit", str(tmp_path / "mixed.jsonl"), "--bootstrap", "10")
    assert refused.returncode == 2 and "record 6 was debated under other settings than record 1" in refused.stderr
    assert "Traceback" not in refused.stderr

    fitted = debate("dynamics", "fit", str(blind), "--bootstrap", "10", "--save", str(tmp_path / "blind-cal.json"))
    assert fitted.returncode == 0, fitted.stderr
    head = fitted.stdout[: fitted.stdout.index("| ")]
    assert "WARNING: fitted without labels on 300 of 300 claims (share factual " in head
    assert "): p_factual assumes the agents are right" in head
    # the header counts claims (not the two pseudo-items each unlabelled claim becomes) and says what the turns tell
    assert "300 debated claims" in head and "95% profile-likelihood interval" in head and "EM converged in" in head
    blind_cal = json.loads((tmp_path / "blind-cal.json").read_text())
    assert blind_cal["version"] == 4 and blind_cal["labels"]["orientation"] == "assumption"
    assert blind_cal["labels"]["needed"] == 30 and len(blind_cal["labels"]["to_label"]) == 30
    assert all(claim.split("/")[0] in LABELS for claim in blind_cal["labels"]["to_label"])
    assert {c["reference"] for c in blind_cal["checks"]} == {"fitted model"}
    # the labels worth asking for: while labels are too few, the spread first; then, by default, a seeded random
    # sample of the other unlabelled claims (the better-measured order), each with its reason
    asks = blind_cal["labels"]["label_next"]
    assert [a["claim"] for a in asks[:30]] == blind_cal["labels"]["to_label"]
    assert all("spread over p_factual" in a["reason"] for a in asks[:30])
    assert blind_cal["labels"]["label_order"] == "random" and blind_cal["labels"]["label_next_needed"] is None
    rest = asks[30:]
    assert len(rest) == 170 and all("drawn at random" in a["reason"] and a["gain"] is None for a in rest)
    assert len({a["claim"] for a in asks}) == 200
    assert "random past its first part, so how many is not counted" in fitted.stdout
    assert "| claim | p_factual | why |" in fitted.stdout and f"| {asks[0]['claim']} |" in fitted.stdout
    # the named variant: past the spread, by the expected fall of p_factual's variance; it says how many
    ranked = tmp_path / "variance-cal.json"
    by_gain = debate(
        "dynamics", "fit", str(blind), "--bootstrap", "10", "--label-order", "variance", "--save", str(ranked)
    )
    assert by_gain.returncode == 0, by_gain.stderr
    variance_labels = json.loads(ranked.read_text())["labels"]
    assert variance_labels["label_order"] == "variance"
    assert [a["claim"] for a in variance_labels["label_next"][:30]] == blind_cal["labels"]["to_label"]
    assert len({a["claim"] for a in variance_labels["label_next"]}) == len(variance_labels["label_next"]) > 30
    assert all(a["gain"] > 0 and "expected to remove" in a["reason"] for a in variance_labels["label_next"][30:])
    assert "label next (p_factual's standard error over the unlabelled claims " in by_gain.stdout

    told = debate("dynamics", "fit", str(log), "--bootstrap", "10", "--save", str(tmp_path / "cal.json"))
    assert told.returncode == 0, told.stderr
    cal = json.loads((tmp_path / "cal.json").read_text())
    assert cal["labels"]["labelled"] == LABELLED and cal["labels"]["orientation"] == "labels"
    # the labels, in the fit, test it held out (each fold by a fit without its labels): they agree, or a correction
    # they bring is kept, or the file says they reject it
    assert cal["labels"]["agreement"].startswith(f"the {LABELLED} labelled claims ")
    assert cal["labels"]["held_out"]["fit_folds"] == 5 and cal["labels"]["held_out"]["labelled"] == LABELLED
    # with labels enough, the order (random by default) never names a labelled claim; p_factual's error is said
    labelled = {item for item in list(LABELS)[:LABELLED]}
    asks = cal["labels"]["label_next"]
    assert asks and all(a["claim"].split("/")[0] not in labelled for a in asks)
    assert cal["labels"]["p_error"] > 0 and cal["labels"]["label_order"] == "random"
    if " disagree " in cal["labels"]["agreement"]:
        rejected = any(" labelled claims reject the fitted p_factual" in line for line in cal["not_calibrated"])
        assert cal["labels"]["recalibration"] is not None or rejected, cal["not_calibrated"]

    # one line scored with the blind calibration, then with the traffic's base rate given
    (tmp_path / "one.jsonl").write_text(_line("sim-0", False) + "\n")
    scored = _score(tmp_path, endpoint, "scored.jsonl")
    assert "assumes the agents are right more often than wrong" in scored["calibration"]["warning"]
    assert scored["calibration"]["sha256"] and scored["calibration"]["prior"] == blind_cal["fitted_on"]["factual_share"]
    shifted = _score(tmp_path, endpoint, "shifted.jsonl", "--prior", "0.9")
    assert shifted["calibration"]["prior"] == 0.9
    p, q = scored["claims"][0]["p_factual"], shifted["claims"][0]["p_factual"]
    share = blind_cal["fitted_on"]["factual_share"]
    odds = (p / (1 - p)) * (0.9 / 0.1) / (share / (1 - share))
    assert math.isclose(q, odds / (1 + odds), rel_tol=1e-9)


def _score(tmp_path: Path, endpoint: str, out: str, *more: str) -> dict[str, Any]:
    done = debate(
        "verify",
        "--input",
        str(tmp_path / "one.jsonl"),
        "--output",
        str(tmp_path / out),
        "--task",
        "qa",
        "--calibration",
        str(tmp_path / "blind-cal.json"),
        *more,
        *_url(endpoint),
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads((tmp_path / out).read_text())["result"]
    return result
