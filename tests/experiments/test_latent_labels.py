"""Labels in the fit (issue 75): a labelled claim enters EM with its label fixed, which orients the class of items
that fools the agents; a class no labelled claim reaches is named, and the file is not calibrated until labels reach
it; the labels' test is cross-validated; the pulled family (each role's own rate per class and its pull toward the
last verdict shown) recovers its parameters from its counts and is what BIC chooses on agents that behave so.

The turns are drawn here, without the engine, from a two-class population in the pulled family: easy items every
role mostly gets right, and items that fool every role; the roles after the first repeat the last verdict they are
shown with their pull."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.calibration import Labels, not_calibrated, reliability
from debate.engine import PosteriorModel
from experiments.dynamics import family, latent, latent_em
from experiments.dynamics.clusters import typical, unreached
from experiments.dynamics.em import run_em
from experiments.dynamics.family import Pulled
from experiments.dynamics.fit_unlabelled import _roles
from experiments.dynamics.label_test import folds_of
from experiments.dynamics.latent import LatentFit, fit_latent
from experiments.dynamics.observe import Observation
from tests.support.properties import Reached, examples

ROLES = ("initial", "trust", "skeptic", "leader")
PULL = {"initial": 0.0, "trust": 0.4, "skeptic": 0.2, "leader": 0.3}
CLASSES = ((0.6, 0.9, 0.1), (0.4, 0.2, 0.8))
"""(share, P(says true | factual), P(says true | hallucinated)): easy items, and items that fool every role."""


def _draw(n: int, seed: int) -> tuple[list[Observation], dict[str, tuple[bool, int]]]:
    """The turns of `n` claims (half factual), and each claim's (label, class)."""
    rng = np.random.default_rng(seed)
    seen, truth = [], {}
    for i in range(n):
        label = bool(rng.random() < 0.5)
        klass = int(rng.random() >= CLASSES[0][0])
        own = CLASSES[klass][1] if label else CLASSES[klass][2]
        shown: tuple[bool, ...] = ()
        for position, role in enumerate(ROLES):
            repeat = bool(shown) and rng.random() < PULL[role]
            verdict = shown[-1] if repeat else bool(rng.random() < own)
            seen.append(Observation(f"c{i}", label, role, "S1", shown, None, verdict, 1, position, None))
            shown = (*shown, verdict)
        truth[f"c{i}"] = (label, klass)
    return seen, truth


def _hidden(seen: list[Observation], kept: set[str]) -> list[Observation]:
    return [o if o.item in kept else replace(o, label=None) for o in seen]


def _ece(fit: LatentFit, fit_seen: list[Observation], test: list[Observation]) -> float:
    model = PosteriorModel(classes=_roles(fit, fit_seen), shares=fit.shares, prior=fit.prior)
    turns: dict[str, list[tuple[str, str, tuple[bool, ...], bool]]] = {}
    labels = {}
    for o in test:
        turns.setdefault(o.item, []).append((o.role, o.state, o.shown, o.verdict))
        labels[o.item] = bool(o.label)
    from debate.engine import TurnContext

    pairs = [(model.p_factual([TurnContext(*t) for t in ts]), labels[k]) for k, ts in turns.items()]
    return reliability([(p, y) for p, y in pairs if p is not None]).ece


def test_labels_fixed_in_em_orient_the_class_that_fools_the_agents() -> None:
    seen, truth = _draw(3000, 1)
    test, _ = _draw(3000, 2)
    kept = set(random.Random(0).sample(sorted(truth), 300))
    partly = _hidden(seen, kept)
    fit = fit_latent(partly, 2, family="pulled")
    where = {item: i for i, item in enumerate(fit.items)}
    # a labelled claim's responsibilities are its label's, exactly
    for item in kept:
        r = fit.responsibilities[where[item]]
        assert r[1 - int(truth[item][0])].sum() == 0.0
    assert not unreached(fit)
    unlabelled = _hidden(seen, set())
    blind = _ece(fit_latent(unlabelled, 2, family="pulled"), unlabelled, test)
    told = _ece(fit, partly, test)
    # 3,000 claims scored: 10 bins leave about 0.02 of noise
    assert blind > 0.2 and told < min(0.08, blind / 4), (blind, told)


def test_a_class_no_label_reaches_is_named_and_leaves_the_file_not_calibrated() -> None:
    seen, truth = _draw(3000, 3)
    easy = sorted(item for item, (_, klass) in truth.items() if klass == 0)
    fooled = sorted(item for item, (_, klass) in truth.items() if klass == 1)
    every = set(random.Random(0).sample(easy, 150)) | set(random.Random(1).sample(fooled, 100))
    fit = fit_latent(_hidden(seen, every), 2, family="pulled")
    assert not unreached(fit)
    # the same fit as if no labelled claim fell in the factual hard class (share 0.30) nor in a class too small to
    # matter: the first is named, the second is not, and without any label the assumption speaks instead
    assert fit.labelled is not None
    mass = fit.labelled.copy()
    mass[1, 1] = 0.4
    shares = {True: [0.7, 0.3], False: [0.99, 0.01]}
    mass[0, 1] = 0.0
    named = unreached(replace(fit, labelled=mass, shares=shares))
    assert named == ["factual class 2 of 2 (share 0.30)"]
    # the claims to label first from it: its most typical unlabelled ones
    unlabelled = set(truth) - every
    first = typical(fit, [(1, 1)], 3, unlabelled)
    surest = sorted(fit.responsibilities[[fit.items.index(i) for i in unlabelled], 1, 1])[-3:]
    assert len(first) == 3 and set(first) <= unlabelled
    assert sorted(fit.responsibilities[[fit.items.index(i) for i in first], 1, 1]) == surest
    assert unreached(replace(fit, labelled=np.zeros((2, 2)), shares=shares)) == []
    labels = Labels(claims=3000, labelled=250, orientation="labels", unreached=named)
    lines = not_calibrated([], 2, labels)
    assert any(line.startswith("no labelled claim falls in factual class 2 of 2") for line in lines), lines
    assert labels.model_copy(update={"orientation": "assumption"}).unreached_line() is None


@settings(
    max_examples=examples(0.3, why="each example refits a family from its counts, a few thousand inner steps"),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    own=st.lists(st.floats(0.05, 0.95), min_size=16, max_size=16),
    pull=st.lists(st.floats(0.0, 0.8), min_size=3, max_size=3),
)
def test_the_pulled_family_recovers_its_rates_from_their_expected_counts(own: list[float], pull: list[float]) -> None:
    keys = [("initial", "S1", ())] + [
        (role, "S1", shown) for role in ROLES[1:] for shown in ((True,), (False,), (True, False), (False, True))
    ]
    family = Pulled(list(ROLES), [ROLES.index(r) for r, _, _ in keys], [int(s[-1]) if s else -1 for _, _, s in keys])
    theta = np.array(own).reshape(4, 2, 2)
    gamma = np.array([0.0, *pull])
    rate = np.array(
        [
            [
                [
                    gamma[ROLES.index(r)] * s[-1] + (1 - gamma[ROLES.index(r)]) * theta[ROLES.index(r), lab, c]
                    if s
                    else theta[ROLES.index(r), lab, c]
                    for r, _, s in keys
                ]
                for c in range(2)
            ]
            for lab in range(2)
        ]
    )
    turns = np.full_like(rate, 1e6)
    x = family.refit(rate * turns, turns, None)
    # a pull of exactly 0 is a boundary EM nears as 1 / steps: its cap leaves rates within 5e-4 there
    assert np.allclose(family.rates(x, 2), rate, atol=1e-3)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(labels=st.dictionaries(st.text(min_size=1, max_size=6), st.one_of(st.none(), st.booleans()), max_size=60))
def test_the_folds_hold_each_labelled_claim_once_and_spread_each_label(
    labels: dict[str, bool | None], reached: Reached
) -> None:
    reached.require(dealt=0.2)  # hypothesis draws small dictionaries often: 38 of 100 once
    folds = folds_of(labels, seed=0)
    known = {item for item, label in labels.items() if label is not None}
    if len(known) < 2:
        reached("too_few")
        assert folds == []
        return
    reached("dealt")
    assert len(folds) == min(5, len(known))
    assert sorted(item for fold in folds for item in fold) == sorted(known)
    for flag in (True, False):
        counts = [sum(labels[item] is flag for item in fold) for fold in folds]
        assert max(counts) - min(counts) <= 1


def test_the_search_after_em_s_cap_ends_where_em_run_to_its_end_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    seen, truth = _draw(1500, 4)
    partly = _hidden(seen, set(random.Random(0).sample(sorted(truth), 150)))
    data = latent_em.LatentData(partly)
    em = latent_em.LatentEm(data, 2, None, "tables")
    start = latent._start(data, 2, np.random.default_rng(0), True)
    slow = run_em(em.step, em.pack(*em.mstep(start)), len(data.items), natural=em.natural, cap=10**6)
    monkeypatch.setattr(family, "_EM_CAP", 20)  # EM hands over long before its end
    _, loglik, steps, converged = em.run(start)
    assert converged and slow.converged and slow.steps > 20, (steps, slow.steps)
    assert loglik == pytest.approx(slow.loglik, abs=1e-6 * len(data.items))
