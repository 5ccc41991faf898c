"""Conformance against the peers' own code, not our reading of it: the functions of the published packages
(`factool` 0.1.3, `refchecker` 0.2.17, installed `--no-deps` by the README's test command) run beside ours on
generated inputs. Their modules are loaded from the installed files one by one, because the packages' own
`__init__` imports models and SDKs we do not install; the functions used import nothing of that.

RefChecker's evaluation script and HaluEval's are in no package: their outputs on generated inputs are recorded once
in tests/fixtures/peers/ (its README.md has the commands that made them).

Without the packages these tests skip, except where DEBATE_REQUIRE_PEERS=1 (CI), where a missing one fails."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from debate.evidence import factool_snippets
from debate.results import evaluation_rates
from debate.rollup import REFCHECKER_LABELS, refchecker_soft, roll_up
from debate.types import ClaimLabel, ClaimVerdict
from tests.support.helpers import FIXTURES

FIXTURES = FIXTURES / "peers"


def _peer_module(
    package: str, relative: str, stubs: dict[str, dict[str, object]] | None = None, unused: tuple[str, ...] = ()
) -> types.ModuleType:
    """One module file of an installed peer package, executed on its own, with stand-ins for the modules it imports
    at the top but the tested function never uses: `stubs` always (with the attributes given), `unused` only when
    they are not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        message = f"the peer package {package!r} is not installed (pip install {package} --no-deps)"
        if os.environ.get("DEBATE_REQUIRE_PEERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    forced = dict(stubs or {})
    forced.update({name: {} for name in unused if importlib.util.find_spec(name) is None})
    saved = {name: sys.modules.get(name) for name in forced}
    try:
        for name, attributes in forced.items():
            stand_in = types.ModuleType(name)
            stand_in.__dict__.update(attributes)
            sys.modules[name] = stand_in
        module_spec = importlib.util.spec_from_file_location(f"_peer_{package}_{path.stem}", path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return module
    finally:
        for name, before in saved.items():
            if before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before


# --- Factool: the Serper response parser (factool/knowledge_qa/google_serper.py) ---------------------------------


def _serper_body(rng: random.Random) -> dict[str, Any]:
    words = ["Paris", "capital", "France", "1889", "tower", "Eiffel", "\n", "river", ""]

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, 5)))

    body: dict[str, Any] = {"organic": []}
    if rng.random() < 0.3:
        box: dict[str, Any] = {}
        for field in ("answer", "snippet", "snippetHighlighted"):
            if rng.random() < 0.4:
                box[field] = [text(), text()] if field == "snippetHighlighted" else text()
        if rng.random() < 0.5:
            box["title"] = text()
        body["answerBox"] = box
    if rng.random() < 0.4:
        graph: dict[str, Any] = {"title": text()}
        for field in ("type", "description"):
            if rng.random() < 0.6:
                graph[field] = text()
        if rng.random() < 0.5:
            graph["attributes"] = {text() or "k": text() for _ in range(rng.randint(0, 3))}
        body["knowledgeGraph"] = graph
    for i in range(rng.randint(0, 14)):
        result: dict[str, Any] = {"title": text(), "link": f"https://example.org/{i}"}
        if rng.random() < 0.8:
            result["snippet"] = text()
        if rng.random() < 0.3:
            result["attributes"] = {f"a{j}": text() for j in range(rng.randint(1, 3))}
        body["organic"].append(result)
    return body


def _factool_source(url: str) -> str:
    return "None" if url.startswith("serper:") else url


def test_factool_search_parsing_matches_factool_code_on_generated_responses() -> None:
    # Its configuration module needs pydantic 1; the parser reads none of it.
    stubs: dict[str, dict[str, object]] = {"factool": {}, "factool.env_config": {"factool_env_config": None}}
    serper = _peer_module("factool", "knowledge_qa/google_serper.py", stubs, unused=("requests", "yaml"))
    wrapper = serper.GoogleSerperAPIWrapper.__new__(serper.GoogleSerperAPIWrapper)
    wrapper.k = 10  # Factool's knowledge-QA pipeline: snippet_cnt = 10, so 5 snippets per query
    rng = random.Random(20261125)
    mismatches = []
    for _ in range(3000):
        body = _serper_body(rng)
        theirs = [(str(s["content"]), s["source"]) for s in wrapper._parse_results(json.loads(json.dumps(body)))]
        ours = [(h.snippet, _factool_source(h.url)) for h in factool_snippets(body, 5)]
        if ours != theirs:
            mismatches.append((body, theirs, ours))
    assert mismatches == []


# --- RefChecker: the aggregators (refchecker/aggregator.py) -----------------------------------------------------

_BY_NAME: dict[str, ClaimLabel] = {name: label for label, name in REFCHECKER_LABELS.items()}


def _claims(names: list[str]) -> list[ClaimVerdict]:
    return [
        ClaimVerdict(
            claim_id=f"c{i}",
            text="t",
            status="verified",
            label=_BY_NAME[n],
            factual={"Entailment": True, "Contradiction": False}.get(n),
            error_severity=0,
            evidence=[],
            debate=None,
        )
        for i, n in enumerate(names)
    ]


def _label_lists(rng: random.Random, n: int) -> Iterator[list[str]]:
    for _ in range(n):
        yield [rng.choice(["Entailment", "Neutral", "Contradiction"]) for _ in range(rng.randint(0, 9))]


@pytest.mark.parametrize("rule", ["soft", "strict", "major"])
def test_refchecker_aggregation_matches_refchecker_code_on_generated_labels(rule: str) -> None:
    aggregator = _peer_module("refchecker", "aggregator.py")
    theirs_of: Callable[[list[str]], object] = getattr(aggregator, f"{rule}_agg")
    names = {"Entailment": "factual", "Neutral": "not_enough_evidence", "Contradiction": "non_factual"}
    mismatches = []
    for labels in _label_lists(random.Random(7), 5000):
        theirs = theirs_of(list(labels))
        if rule == "soft":
            ours: object = refchecker_soft(_claims(labels))
        elif not labels:
            ours = "Abstain"
        else:
            verdict = roll_up(_claims(labels), rule=rule).verdict
            ours = next(name for name, ours_name in names.items() if ours_name == verdict)
        if ours != theirs:
            mismatches.append((labels, theirs, ours))
    assert mismatches == []


# --- RefChecker: its evaluation script's rates (benchmark/evaluation/evaluate.py, recorded) ------------------------


def test_refchecker_evaluation_rates_match_the_recorded_outputs_of_its_script() -> None:
    recorded = json.loads((FIXTURES / "refchecker_evaluate.json").read_text(encoding="utf-8"))
    assert len(recorded["cases"]) == 300
    mismatches = []
    for case in recorded["cases"]:
        ours = evaluation_rates({"ys": ys} for ys in case["ys"])
        theirs = case["evaluate"]
        pairs = {
            "abstain": ours.rates["Abstain"],
            "entailment": ours.rates["Entailment"],
            "neutral": ours.rates["Neutral"],
            "contradiction": ours.rates["Contradiction"],
        }
        for key, value in pairs.items():
            expected = theirs[key]
            got = None if value is None else value * 100
            if (expected is None) != (got is None) or (got is not None and abs(got - expected) > 1e-9):
                mismatches.append((case["ys"], key, expected, got))
    assert mismatches == []


# --- HaluEval: its judge-reply reading (evaluation/evaluate.py, recorded) --------------------------------------------


def test_halueval_reply_reading_matches_the_recorded_outputs_of_its_script() -> None:
    from experiments.methods import halueval_judgement

    recorded = json.loads((FIXTURES / "halueval_judgements.json").read_text(encoding="utf-8"))
    assert len(recorded["cases"]) == 3000
    read = {None: "failed!", True: "Yes", False: "No"}
    mismatches = [c for c in recorded["cases"] if read[halueval_judgement(c["reply"])] != c["judgement"]]
    assert mismatches == []
