"""Item weights have one meaning everywhere (experiments.dynamics.model.Indexed): an item of weight k counts as k
copies of it, weight 0 as no item, and an unlabelled run expanded with certain (0/1) responsibilities is the
labelled run. Issue 72: the calibration file's counts forgot the pseudo-items' weights, so every unlabelled claim
counted fully under both labels and every claim scored alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.dynamics.clusters import expand
from experiments.dynamics.latent import LatentFit, fit_data
from experiments.dynamics.latent_em import LatentData, LatentEm
from experiments.dynamics.model import Indexed
from experiments.dynamics.observe import Observation
from tests.support.properties import Reached, examples

ROLES = ("initial", "trust", "skeptic", "leader")


@st.composite
def _runs(draw: st.DrawFn) -> list[Observation]:
    """A few labelled items, each a handful of turns in random contexts."""
    seen = []
    for i in range(draw(st.integers(1, 6))):
        label = draw(st.booleans())
        for position in range(draw(st.integers(1, 5))):
            shown = tuple(draw(st.lists(st.booleans(), max_size=2)))
            seen.append(
                Observation(
                    item=f"i{i}",
                    label=label,
                    role=draw(st.sampled_from(ROLES)),
                    state=draw(st.sampled_from(("S0", "S1", "S2"))),
                    shown=shown,
                    earlier=None,
                    verdict=draw(st.booleans()),
                    calls=draw(st.integers(1, 3)),
                    position=position,
                    initial=None,
                )
            )
    return seen


Tallies = Mapping[Any, tuple[float, float]]


def _tallies(ix: Indexed) -> Tallies:
    return {context: (true, n) for context, true, n in ix.counts()}


def _same(a: Tallies, b: Tallies) -> None:
    assert set(a) == set(b)
    for key, (t, n) in a.items():
        assert b[key] == pytest.approx((t, n), abs=1e-9), key


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seen=_runs(), data=st.data())
def test_weight_k_is_k_copies_and_weight_0_is_no_item(
    seen: list[Observation], data: st.DataObject, reached: Reached
) -> None:
    reached.require(dropped=0.2, copied=0.2)
    items = list(dict.fromkeys(o.item for o in seen))
    # half the examples drop an item (a weight 0), half only copy: with weights drawn alike for every item, most
    # examples held a 0 and "copied" was reached by 9 of 100
    least = data.draw(st.sampled_from([0, 1]), label="least weight")
    k = {item: data.draw(st.integers(least, 3), label=item) for item in items}
    if least == 0 and len(items) > 1:
        k[items[-1]] = 0
    if not any(k.values()):
        k[items[0]] = 1
    weighted = Indexed(seen, weights={item: float(w) for item, w in k.items()})
    copies = [replace(o, item=f"{o.item}#{j}") for o in seen for j in range(k[o.item])]
    expanded = Indexed(copies)
    _same(_tallies(weighted), _tallies(expanded))
    for mine, theirs in zip(weighted.behaviour().tables, expanded.behaviour().tables, strict=True):
        _same(mine, theirs)  # every back-off level
    assert weighted.factual_share() == pytest.approx(expanded.factual_share())
    assert weighted.calls_per_turn() == pytest.approx(expanded.calls_per_turn())
    # a scale on top of the weights multiplies them: weights of 1 scaled by k tally as the copies do
    plain = Indexed(seen)
    scaled = plain.behaviour(np.array([float(k[item]) for item in plain.items]))
    for mine, theirs in zip(scaled.tables, expanded.behaviour().tables, strict=True):
        _same(mine, theirs)
    reached("dropped" if 0 in k.values() else "copied")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seen=_runs())
def test_an_unlabelled_run_expanded_with_certain_responsibilities_is_the_labelled_run(
    seen: list[Observation], reached: Reached
) -> None:
    reached.require(both_labels=0.2)
    labelled = Indexed(seen)
    hidden = [replace(o, label=None) for o in seen]
    items = list(dict.fromkeys(o.item for o in seen))
    truth = {o.item: o.label for o in seen}
    r = np.zeros((len(items), 2, 1))
    for i, item in enumerate(items):
        r[i, int(bool(truth[item])), 0] = 1.0
    share = float(r[:, 1].mean())
    fit = LatentFit(
        items=items, responsibilities=r, prior=share, shares={True: [1.0], False: [1.0]}, loglik=0.0, parameters=0
    )
    pseudo, weight, origin = expand(hidden, fit)
    ix = Indexed(pseudo, weights=weight, origin=origin)
    assert len(ix.claims) == len(labelled.items)
    assert ix.factual_share() == pytest.approx(labelled.factual_share())
    # contexts carry the label: the pseudo-items' keys are the labelled run's
    _same(_tallies(ix), _tallies(labelled))
    reached("both_labels" if len(set(truth.values())) == 2 else "one_label")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seen=_runs(), data=st.data())
def test_each_unlabelled_turn_counts_once_over_both_labels(
    seen: list[Observation], data: st.DataObject, reached: Reached
) -> None:
    """Whatever the responsibilities, an unlabelled claim's turn is one turn in all: split between its labels by
    P(label | turns), never counted fully under both (what the version 2 calibration files did)."""
    reached.require(split=0.2)  # floats(0, 1) often draws the ends: 38 of 100 split once; set well below that
    hidden = [replace(o, label=None) for o in seen]
    items = list(dict.fromkeys(o.item for o in seen))
    p = np.array([data.draw(st.floats(0.0, 1.0), label=item) for item in items])
    r = np.stack([1 - p, p], axis=1)[:, :, None]
    fit = LatentFit(
        items=items,
        responsibilities=r,
        prior=float(p.mean()),
        shares={True: [1.0], False: [1.0]},
        loglik=0.0,
        parameters=0,
    )
    pseudo, weight, origin = expand(hidden, fit)
    ix = Indexed(pseudo, weights=weight, origin=origin)
    per_context: dict[tuple[object, ...], float] = {}
    for (role, state, _label, shown), _true, n in ix.counts():
        per_context[(role, state, shown)] = per_context.get((role, state, shown), 0.0) + n
    turns: dict[tuple[object, ...], float] = {}
    for o in seen:
        turns[(o.role, o.state, o.shown)] = turns.get((o.role, o.state, o.shown), 0.0) + 1.0
    for key, n in turns.items():
        assert per_context.get(key, 0.0) == pytest.approx(n, abs=1e-6), key
    assert ix.turn_weights().sum() == pytest.approx(len(seen), abs=1e-6)
    reached("split" if np.any((p > 1e-6) & (p < 1 - 1e-6)) else "certain")


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    max_examples=examples(0.3, why="each example runs EM to its fixed point twice"),
)
@given(seen=_runs(), data=st.data())
def test_em_counts_an_item_of_weight_k_as_k_copies(
    seen: list[Observation], data: st.DataObject, reached: Reached
) -> None:
    """The one EM (experiments.dynamics.latent) with item weights: a bootstrap replicate's multiplicities, a
    pseudo-item's P(label). An item of weight k fits as k copies of it, and the rows EM steps over (the items with
    the same debate, as one) give every item the posterior its own turns give it."""
    reached.require(latent=0.2)
    items = list(dict.fromkeys(o.item for o in seen))
    hidden = {item for item in items if data.draw(st.booleans(), label=f"hide {item}")}
    seen = [replace(o, label=None) if o.item in hidden else o for o in seen]
    k = {item: data.draw(st.integers(1, 3), label=f"weight {item}") for item in items}
    weighted = LatentData(seen, {item: float(w) for item, w in k.items()})
    copies = LatentData([replace(o, item=f"{o.item}#{j}") for o in seen for j in range(k[o.item])])
    one, many = fit_data(weighted, 1), fit_data(copies, 1)
    assert one.loglik == pytest.approx(many.loglik, abs=1e-6)
    assert one.prior == pytest.approx(many.prior, abs=1e-6)
    for i, item in enumerate(weighted.items):
        j = copies.items.index(f"{item}#0")
        assert one.responsibilities[i] == pytest.approx(many.responsibilities[j], abs=1e-6), item
    em = LatentEm(weighted, 1, None)
    x, w = em.mstep(one.responsibilities)
    log = (em.joint(x, w, weighted.true, weighted.false) + weighted.mask[:, :, None]).reshape(len(items), -1)
    direct = np.exp(log - log.max(1, keepdims=True))
    direct /= direct.sum(1, keepdims=True)
    assert em.estep(x, w)[0].reshape(len(items), -1) == pytest.approx(direct, abs=1e-12)
    reached("latent" if hidden else "labelled")
