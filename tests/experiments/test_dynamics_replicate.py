"""Runs of a fitted model (experiments.dynamics.replicate), what the checks of the fitted model compare a real run
with: their debates must be the engine's debates, so their turns per label match the exact expectation of
debate.engine (the paper's rule and the posterior stop), and each turn's rate in its context is the model's."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from debate.engine import PosteriorModel, governed_outcome, governed_paths, load_chain, outcome
from experiments.dynamics.replicate import Cells, Design, replicate_cells


@dataclass(frozen=True)
class _Rates:
    """A role model with a rate per (role, state, label, shown) from a seeded hash: every context differs."""

    salt: int

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        key = f"{self.salt}:{role}:{state}:{label}:{shown}"
        return 0.1 + 0.8 * (sum(ord(c) * (i + 1) for i, c in enumerate(key)) % 997) / 997


def _turns(cells: Cells, label: bool | None) -> float:
    return sum(n for key, (_, n) in cells.items() if key[2] is label)


def _mean_and_error(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values, ddof=1) / math.sqrt(len(values)))


@pytest.mark.parametrize("chain_name", ["true-to-skeptic", "always-trust", "true-to-trust"])
@pytest.mark.parametrize("min_rounds", [0, 2])
def test_turns_per_debate_match_the_exact_expectation(chain_name: str, min_rounds: int) -> None:
    chain = load_chain(chain_name)
    model = PosteriorModel(classes=[_Rates(1), _Rates(2)], shares={True: [0.7, 0.3], False: [0.4, 0.6]}, prior=0.5)
    items = tuple(f"i{i}" for i in range(100))
    labels = {item: i % 2 == 0 for i, item in enumerate(items)}
    runs = list(replicate_cells(model, [Design(chain, min_rounds, 4, items)], labels, runs=200, seed=5))
    for label in (True, False):
        exact = sum(
            share * outcome(m, chain, min_rounds=min_rounds, max_rounds=4, label=label).turns
            for m, share in zip(model.classes, model.shares[label], strict=True)
        )
        mean, error = _mean_and_error([_turns(c, label) / 50 for c in runs])
        assert abs(mean - exact) < 5 * error + 1e-9, (label, mean, exact, error)


def test_the_posterior_stop_plays_out_as_its_exact_paths_say() -> None:
    chain = load_chain("true-to-skeptic")
    governor = PosteriorModel(classes=[_Rates(3)], shares={True: [1.0], False: [1.0]}, prior=0.5)
    agents = PosteriorModel(classes=[_Rates(4)], shares={True: [1.0], False: [1.0]}, prior=0.5)
    items = tuple(f"i{i}" for i in range(100))
    labels = {item: i % 2 == 0 for i, item in enumerate(items)}
    design = Design(chain, 2, 4, items, threshold=0.8, governor=governor)
    runs = list(replicate_cells(agents, [design], labels, runs=200, seed=6))
    paths = governed_paths(governor, chain, threshold=0.8, max_rounds=4)
    for label in (True, False):
        exact = governed_outcome(paths, agents.classes[0], label=label).turns
        mean, error = _mean_and_error([_turns(c, label) / 50 for c in runs])
        assert abs(mean - exact) < 5 * error + 1e-9, (label, mean, exact, error)


def test_each_context_says_true_at_the_model_rate_and_unlabelled_items_stay_unlabelled() -> None:
    chain = load_chain("true-to-skeptic")
    model = PosteriorModel(classes=[_Rates(7)], shares={True: [1.0], False: [1.0]}, prior=0.3)
    items = tuple(f"i{i}" for i in range(300))
    labels: dict[str, bool | None] = {item: None for item in items}
    [cells] = replicate_cells(model, [Design(chain, 2, 4, items)], labels, runs=1, seed=8)
    assert {key[2] for key in cells} == {None}
    # the initial turn (shown nothing) of every debate: its rate mixes the two labels by the prior
    initial = [(t, n) for (role, *_), (t, n) in cells.items() if role == "initial"]
    true, n = sum(t for t, _ in initial), sum(n for _, n in initial)
    expected = 0.3 * _Rates(7).p("initial", "S0", True, ()) + 0.7 * _Rates(7).p("initial", "S0", False, ())
    assert n == 300 and abs(true / n - expected) < 4 * math.sqrt(expected * (1 - expected) / n)
    labelled = dict.fromkeys(items, True)
    [cells] = replicate_cells(model, [Design(chain, 2, 4, items)], labelled, runs=1, seed=8)
    rows = [(key, t, n) for key, (t, n) in cells.items() if key[2] is True and n >= 200]
    assert rows
    for (role, state, label, shown, _, _), t, n in rows:
        p = _Rates(7).p(role, state, bool(label), shown)
        assert abs(t / n - p) < 5 * math.sqrt(p * (1 - p) / n), (role, state, shown, t / n, p)
