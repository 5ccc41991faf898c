"""A fit without every label (experiments.dynamics.latent and .labelled), on populations run through the real engine
in process: alike items fitted without labels give calibrated probabilities under the stated assumption; a class of
items that fools the agents is invisible without labels and exposed by a few in the fit; too few labels say how
many more and which."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest

from debate.calibration import HELD_OUT_LEVEL
from debate.engine import TurnContext, load_chain
from experiments.dynamics import Observation, fit_model
from experiments.dynamics.calibrate import reliability
from experiments.dynamics.examples import CALIBRATION_EXAMPLES
from experiments.dynamics.fitted import FamilyChoice, FittedModel
from experiments.dynamics.predict import governor_of
from experiments.dynamics.replicate import Design
from tests.support.recorded import RunSpec, recorded

pytestmark = pytest.mark.slow  # fits thousands of simulated claims (about two CPU minutes): not for the quick lane

CHAIN, MAX_ROUNDS = "true-to-skeptic", 5
N = 800


def _seen(name: str, seed: int, prefix: str, n: int = N) -> list[Observation]:
    """The population's run through the real engine, recorded once (tests/support/recorded.py)."""
    spec = RunSpec(
        f"unlabelled-{name}-{prefix}-n{n}-l{seed}",
        CALIBRATION_EXAMPLES[name],
        CHAIN,
        2,
        MAX_ROUNDS,
        n,
        labels_seed=seed,
        prefix=prefix,
    )
    return recorded(spec)


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[list[Observation], list[Observation]]]:
    """Per population, a run to fit and a run of other items to score (alike items: 2,000 to fit, where the base
    rate of a fit without labels settles; on 800 it was 0.39 for a true 0.5)."""
    return {
        "markov": (_seen("markov", 1, "sim", 2000), _seen("markov", 2, "test")),
        "two-class": (_seen("two-class", 1, "sim"), _seen("two-class", 2, "test")),
        "memory": (_seen("memory", 1, "sim", 500), []),
        "state": (_seen("state", 1, "sim", 500), []),
    }


def _hide(seen: list[Observation], keep: int) -> list[Observation]:
    items = list(dict.fromkeys(o.item for o in seen))
    kept = set(random.Random(0).sample(items, keep))
    return [o if o.item in kept else replace(o, label=None) for o in seen]


def _fit(seen: list[Observation], base_rate: float | None = None, family: FamilyChoice = "auto") -> FittedModel:
    design = Design(load_chain(CHAIN), 2, MAX_ROUNDS, tuple(dict.fromkeys(o.item for o in seen)))
    return fit_model(seen, bootstrap=0, designs=[design], base_rate=base_rate, family=family)


def _ece(fitted: FittedModel, test: list[Observation]) -> float:
    governor, turns, labels = governor_of(fitted), defaultdict(list), {}
    for o in test:
        turns[o.item].append(TurnContext(o.role, o.state, o.shown, o.verdict))
        labels[o.item] = bool(o.label)
    pairs = [(governor.p_factual(t), labels[k]) for k, t in turns.items()]
    return reliability([(p, label) for p, label in pairs if p is not None]).ece


def test_alike_items_fitted_without_labels_are_calibrated_under_the_stated_assumption(
    runs: dict[str, tuple[list[Observation], list[Observation]]],
) -> None:
    seen, test = runs["markov"]
    fitted = _fit(_hide(seen, 0))
    labels = fitted.choice.labels
    assert labels is not None and labels.labelled == 0 and labels.orientation == "assumption"
    # these agents repeat or decide (the pulled family is their own model): BIC prefers it to the tables
    assert (fitted.choice.classes, fitted.choice.family) == (1, "pulled"), fitted.choice.reason
    assert not any(c.rejected for c in fitted.diagnostics.checks)
    assert any("assumes the agents are right more often than wrong" in w for w in fitted.diagnostics.warnings)
    # the truth it never saw: half the claims factual, inside the share's interval
    assert labels.share_interval is not None and labels.share_interval[0] < 0.5 < labels.share_interval[1]
    assert abs(fitted.prior - 0.5) < 0.1 and labels.em_converged
    blind = _ece(fitted, test)
    assert blind < 0.1
    # a rate per context spends more parameters: its interval of the share is too wide to calibrate, and the fit
    # says so and what settles it
    tables = _fit(_hide(seen, 0), family="tables")
    told = tables.choice.labels
    assert told is not None and told.share_interval is not None
    width = told.share_interval[1] - told.share_interval[0]
    assert width > labels.share_interval[1] - labels.share_interval[0]
    said = [w for w in tables.diagnostics.warnings if w.startswith("the turns do not pin the share")]
    assert said and "--base-rate P" in said[0] and width > 0.1
    # the base rate stated: held in the fit, and p_factual calibrated on other items
    stated = _fit(_hide(seen, 0), base_rate=0.5)
    told = stated.choice.labels
    assert told is not None and told.base_rate == 0.5 and told.share_interval is None and stated.prior == 0.5
    assert not any(w.startswith("the turns do not pin") for w in stated.diagnostics.warnings)
    assert _ece(stated, test) < 0.05  # 800 claims scored: 10 bins leave about 0.02 of noise


def test_a_class_that_fools_the_agents_is_invisible_without_labels_and_labels_in_the_fit_expose_it(
    runs: dict[str, tuple[list[Observation], list[Observation]]],
) -> None:
    seen, test = runs["two-class"]
    blind = _fit(_hide(seen, 0))
    # every check of the fitted model passes: without labels the hard items are the other label's mirror image
    assert not any(c.rejected for c in blind.diagnostics.checks), blind.diagnostics.checks
    before = _ece(blind, test)
    assert before > 0.2
    told = _fit(_hide(seen, 60))
    labels = told.choice.labels
    assert labels is not None and labels.orientation == "labels" and labels.labelled == 60
    # the labels, fixed in EM, orient a second class: the items that fool the agents
    assert told.choice.classes == 2 and not labels.unreached, told.choice.reason
    assert _ece(told, test) < before / 2
    # each label scored by a fit that did not see it; where they reject it, the file is not calibrated
    test_of = labels.held_out
    assert test_of is not None and test_of.fit_folds == 5 and test_of.labelled == 60
    assert (labels.rejection_line() is not None) == (test_of.p_value < HELD_OUT_LEVEL)
    # with a rate per context, 800 claims keep one class; the held-out labels correct it instead
    tables = _fit(_hide(seen, 60), family="tables").choice.labels
    assert tables is not None and tables.recalibration is not None and tables.recalibration.slope < 0.5
    assert tables.held_out is not None and tables.held_out.log_loss < tables.held_out.log_loss_uncorrected


def test_labels_that_agree_leave_the_fit_alone(runs: dict[str, tuple[list[Observation], list[Observation]]]) -> None:
    seen, _ = runs["markov"]
    labels = _fit(_hide(seen, 60)).choice.labels
    assert labels is not None and labels.agreement is not None and " agree " in labels.agreement
    assert labels.recalibration is None


def test_too_few_labels_say_how_many_more_and_which_claims(
    runs: dict[str, tuple[list[Observation], list[Observation]]],
) -> None:
    seen, _ = runs["markov"]
    partly = _hide(seen, 10)
    fitted = _fit(partly)
    labels = fitted.choice.labels
    assert labels is not None and labels.orientation == "assumption" and labels.needed == 20, labels
    labelled = {o.item for o in partly if o.label is not None}
    assert len(labels.to_label) == 20 and not set(labels.to_label) & labelled
    # spread over p_factual: from the least likely factual to the most
    governor, turns = governor_of(fitted), defaultdict(list)
    for o in seen:
        turns[o.item].append(TurnContext(o.role, o.state, o.shown, o.verdict))
    unlabelled = sorted(p for k, t in turns.items() if k not in labelled and (p := governor.p_factual(t)) is not None)
    chosen = sorted(p for k in labels.to_label if (p := governor.p_factual(turns[k])) is not None)
    assert chosen[0] == unlabelled[0] and chosen[-1] == unlabelled[-1]


def test_a_fit_without_labels_still_refuses_agents_that_break_the_model(
    runs: dict[str, tuple[list[Observation], list[Observation]]],
) -> None:
    """The checks of the fitted model hold without labels too: memory fails the Markov check, a role that behaves
    by state the state check (its null shares contexts across states under the label the run does not know)."""
    from debate.calibration import not_calibrated

    for name, check in (("memory", "markov"), ("state", "state")):
        fitted = _fit(_hide(runs[name][0], 0))
        failed = {c.name for c in fitted.diagnostics.checks if c.rejected}
        assert check in failed, (name, fitted.diagnostics.checks)
        lines = not_calibrated(list(fitted.diagnostics.checks), fitted.choice.classes, fitted.choice.labels)
        assert any(line.startswith(f"the {check} check fails") for line in lines), lines


def _implied_shares(fitted: FittedModel) -> dict[bool, list[float]]:
    """Each label's class shares as the stored counts imply them: every claim has one initial turn, so the initial
    agent's turns per label and class are the claims' mass there."""
    mass: dict[bool, list[float]] = {True: [], False: []}
    for c in range(fitted.point.classes):
        for label in (True, False):
            mass[label].append(
                sum(
                    n
                    for (_, state, lab, shown), _, n in fitted.class_counts(c)
                    if lab is label and not shown and state == "S0"
                )
            )
    return {label: [m / sum(ms) for m in ms] for label, ms in mass.items()}


@pytest.mark.parametrize("labelled", [800, 40], ids=["labelled", "partly-labelled"])
def test_a_files_shares_are_the_ones_its_counts_imply(
    runs: dict[str, tuple[list[Observation], list[Observation]]], labelled: int
) -> None:
    """The class shares a calibration file stores and the counts it stores come from one set of responsibilities:
    they once came from two (an E step under smoothed tables in between) and disagreed by a point."""
    seen = runs["two-class"][0] if labelled == N else _hide(runs["two-class"][0], labelled)
    fitted = _fit(seen) if labelled < N else fit_model(seen, bootstrap=0)
    assert fitted.point.classes > 1, fitted.choice.reason  # the property says nothing on one class
    implied = _implied_shares(fitted)
    for label in (True, False):
        assert fitted.point.shares[label] == pytest.approx(implied[label], abs=1e-9), (label, fitted.point.shares)
