"""The labels worth asking for (issue 75, part 3): the claims' scores are the likelihood's own gradient, the greedy
order's bookkeeping is the information recomputed, and labels taken in the order narrow p_factual more than as many
random ones; the fit says how many are needed and saves the order with a reason on each claim.

The turns are those of tests/experiments/test_latent_labels.py: a two-class population in the pulled family."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from experiments.dynamics import worth as worth_module
from experiments.dynamics.family import FamilyName
from experiments.dynamics.latent import fit_latent
from experiments.dynamics.latent_em import LatentData, LatentEm
from experiments.dynamics.worth import PRIOR, TARGET_ERROR, _greedy, worth
from tests.experiments.test_latent_labels import _draw, _hidden
from tests.support.properties import Reached, examples


def test_the_claims_scores_sum_to_the_likelihoods_gradient() -> None:
    seen, truth = _draw(200, 3)
    partly = _hidden(seen, set(random.Random(1).sample(sorted(truth), 20)))
    fit = fit_latent(partly, 2, family="pulled")
    data = LatentData(partly)
    em = LatentEm(data, 2, None, "pulled")
    # away from the maximum, where the gradient is not 0
    v = em.pack(*em.mstep(fit.responsibilities)) + np.random.default_rng(0).normal(0, 0.2, em.size + 4)
    logs, gradient = worth_module._scores(em, v, data.true, data.false)
    p = np.exp(logs[:, 1] - np.logaddexp(logs[:, 0], logs[:, 1]))
    summed = np.where(
        data.known[:, None] >= 0,
        gradient[np.arange(len(data.items)), np.maximum(data.known, 0)],
        p[:, None] * gradient[:, 1] + (1 - p[:, None]) * gradient[:, 0],
    ).sum(0)
    loss, analytic = em.loss(v)
    # the log-likelihood itself: each claim's turns under the labels it may have
    assert np.isclose(-loss, float(np.logaddexp.reduce(logs + data.mask, axis=1).sum()))
    assert np.allclose(summed, -analytic, rtol=1e-4, atol=1e-4 * len(data.items))


@settings(
    max_examples=examples(0.15, why="each example fits EM on up to 150 claims"),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
@given(
    n=st.integers(40, 150),
    share=st.floats(0.05, 0.5),
    classes=st.integers(1, 2),
    family=st.sampled_from(["tables", "pulled"]),
    seed=st.integers(0, 2**16),
    taken=st.integers(1, 8),
)
# No label at all, in both families and class counts, every run: drawn, the labelled and the blind side came in as
# few as 2 of 15 examples (one_of a share of 0 or a float, and a coin before the float, both failed a run).
@example(n=60, share=0.0, classes=1, family="tables", seed=1, taken=3)
@example(n=90, share=0.0, classes=2, family="pulled", seed=2, taken=5)
def test_the_greedy_bookkeeping_is_the_information_recomputed(
    n: int, share: float, classes: int, family: FamilyName, seed: int, taken: int, reached: Reached
) -> None:
    reached.require(labelled=0.5, blind=0.05)
    seen, truth = _draw(n, seed)
    partly = _hidden(seen, set(random.Random(seed).sample(sorted(truth), round(n * share))))
    fit = fit_latent(partly, classes, family=family)
    data, state, pattern_of, p = _greedy(partly, fit)
    reached("labelled" if (data.known >= 0).any() else "blind")
    # the same quantities from scratch: I from the claims' scores, M from p_factual's gradients
    em = LatentEm(data, classes, None, family)
    v = em.pack(*em.mstep(fit.responsibilities))
    logs, gradient = worth_module._scores(em, v, data.true, data.false)
    q = np.exp(logs[:, 1] - np.logaddexp(logs[:, 0], logs[:, 1]))
    assert np.allclose(p[pattern_of], q)  # a claim's p_factual is its pattern's
    d = gradient[:, 1] - gradient[:, 0]
    scores = np.where(
        data.known[:, None] >= 0,
        gradient[np.arange(len(data.items)), np.maximum(data.known, 0)],
        q[:, None] * gradient[:, 1] + (1 - q[:, None]) * gradient[:, 0],
    )
    information = scores.T @ scores
    unlabelled = data.known < 0
    jacobian = (q * (1 - q))[:, None] * d
    spread = jacobian[unlabelled].T @ jacobian[unlabelled]

    def summed(info: np.ndarray) -> float:
        return float(np.trace(np.linalg.inv(info + PRIOR * np.eye(len(info))) @ spread))

    assert np.isclose(state.total, summed(information), rtol=1e-6, atol=1e-12)
    scale = max(summed(information), 1e-12)
    rows = np.concatenate([data.true, data.turns], axis=1)
    patterns = np.unique(rows, axis=0)
    for _ in range(min(taken, int(unlabelled.sum()))):
        k, gain = state.take()
        assert gain >= -1e-9 * scale
        # the taken pattern adds its expected information v d d' (Louis: the label's missing information)
        claim = int(np.flatnonzero(np.all(rows == patterns[k], 1))[0])
        information = information + q[claim] * (1 - q[claim]) * np.outer(d[claim], d[claim])
        assert np.isclose(state.total, summed(information), rtol=1e-6, atol=1e-12)
    found = worth(partly, fit, asked=taken)
    assert len(found.claims) == len(set(found.claims)) == min(taken, int(unlabelled.sum()))
    assert all(data.known[data.items.index(c)] < 0 for c in found.claims)


@pytest.mark.slow
def test_labels_in_the_order_narrow_p_factual_more_than_as_many_random_ones() -> None:
    seen, truth = _draw(1500, 5)
    start = set(random.Random(3).sample(sorted(truth), 60))
    fit = fit_latent(_hidden(seen, start), 2, family="pulled")
    found = worth(_hidden(seen, start), fit)
    assert len(found.claims) == len(set(found.claims)) and not start & set(found.claims)
    assert all(g > 0 for g in found.gains) and sum(found.gains) < 1
    unlabelled = sorted(set(truth) - start)
    errors = {}
    for name, more in (
        ("chosen", found.claims[:60]),
        ("random", random.Random(4).sample(unlabelled, 60)),
    ):
        kept = start | set(more)
        refit = fit_latent(_hidden(seen, kept), 2, family="pulled")
        errors[name] = worth(_hidden(seen, kept), refit).error
    assert errors["chosen"] < errors["random"] < found.error, errors
    assert found.needed is None or found.needed > 0  # 1,500 claims with 60 labels: not yet at TARGET_ERROR
    assert found.error > TARGET_ERROR
