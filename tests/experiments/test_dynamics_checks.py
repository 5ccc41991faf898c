"""The checks behind every dynamics prediction, on populations that break one assumption each (run through the real
engine): each check fires on the population that breaks its assumption and stays quiet on the Markov one, the
mixture of item classes holds the truth where the one-class model does not, and the commands say so above their
tables."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from debate.engine import PosteriorModel, load_chain
from experiments.dynamics import Observation, diagnose, fit_model, markov_check, predict
from experiments.dynamics.examples import CALIBRATION_EXAMPLES, EXAMPLES
from experiments.dynamics.predict import Setting
from experiments.dynamics.replicate import Design, cells_of, replicate_cells
from experiments.dynamics.simulate import Population, exact_accuracy, load_population
from tests.support.helpers import ROOT, debate
from tests.support.recorded import RunSpec, recorded

pytestmark = pytest.mark.slow  # starts processes

CHAIN = "true-to-skeptic"


def _seen(name: str, population: Population, n: int, labels_seed: int = 1) -> list[Observation]:
    """The population's run through the real engine, recorded once (tests/support/recorded.py)."""
    spec = RunSpec(f"checks-{name}-n{n}-l{labels_seed}", population, CHAIN, 2, 4, n, labels_seed=labels_seed)
    return recorded(spec)


@pytest.fixture(scope="module")
def runs() -> dict[str, list[Observation]]:
    return {name: _seen(name, population, 800) for name, population in CALIBRATION_EXAMPLES.items()}


def _design(seen: list[Observation]) -> Design:
    return Design(load_chain(CHAIN), 2, 4, tuple(dict.fromkeys(o.item for o in seen)))


def test_each_check_fires_on_the_population_that_breaks_it_and_not_on_the_markov_one(
    runs: dict[str, list[Observation]],
) -> None:
    """The checks on the pooled turns (no designs given: the chi-square reference)."""
    expected = {"markov": set(), "two-class": {"heterogeneity"}, "memory": {"markov"}, "state": {"state"}}
    for name, seen in runs.items():
        if name not in expected:
            continue
        fitted = fit_model(seen, bootstrap=20)
        found = diagnose(seen, fitted.choice)
        failed = {c.name for c in found.checks if c.rejected}
        assert expected[name] <= failed, (name, found.checks)
        if name == "markov":
            assert not failed and not found.warnings and fitted.choice.classes == 1, found
        else:
            assert found.warnings, name
        if name in ("memory", "state"):
            assert "heterogeneity" not in failed and fitted.choice.classes == 1, (name, found.checks)
    state = diagnose(runs["state"], fit_model(runs["state"], bootstrap=0).choice).check("state")
    assert state is not None and "differs across states: trust" in state.detail


def test_the_checks_of_the_fitted_model_give_each_population_its_verdict(runs: dict[str, list[Observation]]) -> None:
    """Against runs of the model that was fitted, items of unequal difficulty whose agents follow it (two-class,
    three-class) pass where the pooled checks failed them, and the populations that break the model (memory,
    state) are still refused; their calibrations say so."""
    from debate.calibration import not_calibrated

    # memory also makes a role look state-dependent (its earlier opinion differs by the state it entered)
    refused = {"memory": ({"markov"}, {"markov", "state"}), "state": ({"state"}, {"state"})}
    for name, seen in runs.items():
        fitted = fit_model(seen, bootstrap=0, designs=[_design(seen)])
        checks = {c.name: c for c in fitted.diagnostics.checks}
        assert {c.reference for c in checks.values()} == {"fitted model"}, name
        failed = {n for n, c in checks.items() if c.rejected}
        least, most = refused.get(name, (set(), set()))
        assert least <= failed <= most, (name, [c.detail for c in checks.values()])
        lines = not_calibrated(list(checks.values()), fitted.choice.classes)
        assert bool(lines) is (name in refused), (name, lines)
        if name in ("two-class", "three-class"):
            assert fitted.choice.classes > 1 and "on the pooled turns fails" in fitted.choice.reason, name
            pooled = diagnose(seen, fitted.choice)
            assert pooled.check("heterogeneity").rejected, name  # type: ignore[union-attr]
            assert fitted.diagnostics.warnings == [], (name, fitted.diagnostics.warnings)
    state = fit_model(runs["state"], bootstrap=0, designs=[_design(runs["state"])]).diagnostics.check("state")
    assert state is not None and "differs across states: trust" in state.detail


def test_runs_of_the_fitted_model_look_like_the_engine_run_it_was_fitted_on(
    runs: dict[str, list[Observation]],
) -> None:
    """Cell by cell (role, state, label, shown, the verdict before, the initial verdict), the engine's run of the
    Markov population lies inside the spread of runs of its fitted model: the replicates code every context as the
    engine's turns do."""
    seen = runs["markov"]
    fitted = fit_model(seen, bootstrap=0)
    model = PosteriorModel(classes=fitted.point.components, shares=fitted.point.shares, prior=0.5)
    labels = {o.item: o.label for o in seen}
    simulated = list(replicate_cells(model, [_design(seen)], labels, runs=200, seed=1))
    observed = cells_of(seen)
    assert set(observed) <= set().union(*simulated)
    far = []
    for cell, (_, n) in observed.items():
        counts = [c.get(cell, (0.0, 0.0))[1] for c in simulated]
        mean, sd = sum(counts) / len(counts), float(np.std(counts))
        if mean >= 20 and abs(n - mean) > 5 * sd:
            far.append((cell, n, mean, sd))
    assert not far, far


def test_false_alarms_on_the_markov_population_stay_rare() -> None:
    """Ten independent runs (their own items and draws) of 300 claims: at most one raises any warning or picks
    classes (four checks at 1% each: about 4% per run expected)."""
    alarms = []
    for seed in range(10):
        population = EXAMPLES["markov"].model_copy(update={"seed": 100 + seed})
        seen = _seen(f"markov-p{100 + seed}", population, 300, labels_seed=seed)
        fitted = fit_model(seen, bootstrap=0, seed=seed)
        found = diagnose(seen, fitted.choice)
        if found.warnings or fitted.choice.classes > 1:
            alarms.append((seed, found.warnings, fitted.choice.reason))
    assert len(alarms) <= 1, alarms


def test_the_mixture_holds_the_truth_where_one_class_does_not(runs: dict[str, list[Observation]]) -> None:
    population, seen = EXAMPLES["two-class"], runs["two-class"]
    settings = [
        Setting(chain, m, 4)
        for chain in ("true-to-skeptic", "always-trust", "true-to-trust", "always-skeptic")
        for m in (1, 2, 3)
    ]
    truths = [exact_accuracy(population, s) for s in settings]
    mixture = predict(seen, settings, share_true=0.5, bootstrap=100, seed=3)
    one = predict(seen, settings, share_true=0.5, bootstrap=100, seed=3, model="one-class")
    missed = [
        (s, t, p.accuracy_interval)
        for s, t, p in zip(settings, truths, mixture, strict=True)
        if not p.accuracy_interval[0] <= t <= p.accuracy_interval[1]
    ]
    assert len(missed) <= 1, missed
    one_missed = [
        s
        for s, t, p in zip(settings, truths, one, strict=True)
        if not p.accuracy_interval[0] <= t <= p.accuracy_interval[1]
    ]
    assert len(one_missed) >= 4, one_missed
    worst = max(abs(t - p.accuracy) for t, p in zip(truths, mixture, strict=True))
    assert worst < max(abs(t - p.accuracy) for t, p in zip(truths, one, strict=True)) / 2


def test_runs_on_the_same_items_show_unequal_difficulty_across_runs() -> None:
    """The initial agent's verdicts on the same items across runs: binomial for alike items, over-dispersed for
    classes of items."""
    for name, rejected in (("two-class", True), ("markov", False)):
        population = EXAMPLES[name]
        first, second = (_seen(f"{name}-p{s}", population.model_copy(update={"seed": s}), 300) for s in (21, 22))
        fitted = fit_model(first, bootstrap=0, runs=[first, second])
        check = diagnose(first, fitted.choice, runs=[first, second]).check("overdispersion")
        assert check is not None and check.rejected is rejected, (name, check)
        assert check.detail.endswith("over 300 items seen in 2 runs"), check.detail


def test_back_offs_and_the_cap_are_stated(runs: dict[str, list[Observation]]) -> None:
    seen = runs["markov"]
    own, other, capped = predict(
        seen, [Setting(CHAIN, 2, 4), Setting("always-trust", 2, 4), Setting(CHAIN, 4, 4)], share_true=0.5, bootstrap=50
    )
    assert own.backed_off == [] and own.backoff_range is None
    # always-trust shows trust a "true" in S1, which the paper's rule never does (it enters S1 after "false")
    assert "trust in S1, label True, shown [True]" in other.backed_off and other.backoff_range is not None
    low, high = other.backoff_range
    assert low <= other.accuracy <= high and high - low > 0.005
    assert own.capped < 0.2 and capped.capped > 0.3
    # without bootstrap replicates the intervals and the back-off range collapse to the point, and say so
    [bare] = predict(seen, [Setting("always-trust", 2, 4)], share_true=0.5, bootstrap=0)
    assert bare.accuracy_interval == (bare.accuracy, bare.accuracy) == bare.backoff_range


def test_the_roles_file_states_classes_and_state_dependence(tmp_path: Path) -> None:
    roles = tmp_path / "roles.toml"
    roles.write_text(
        "seed = 7\n[roles.trust]\nconformity = 0.6\n[roles.trust.states.S1]\nconformity = 0.0\n"
        "[[classes]]\nshare = 0.6\nfactual_true = 0.92\nhallucinated_true = 0.08\n"
        "[[classes]]\nshare = 0.4\nfactual_true = 0.25\nhallucinated_true = 0.75\n"
        "[classes.roles.leader]\nfactual_true = 0.5\n"
    )
    population = load_population(roles)
    assert population.p("trust", "S1", True, (False,), 0) == pytest.approx(0.92)
    assert population.p("trust", "S2", True, (False,), 0) == pytest.approx(0.4 * 0.92)
    assert population.p("leader", "S1", True, (), 1) == 0.5 and population.p("skeptic", "S1", False, (), 1) == 0.75
    assert [population.class_of(f"sim-{i}") for i in range(5)] == [population.class_of(f"sim-{i}") for i in range(5)]
    roles.write_text("[[classes]]\nshare = 0.6\n[[classes]]\nshare = 0.3\n")
    bad = debate("dynamics", "simulate", "--roles", str(roles), "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "classes: the shares add up to 0.9, not 1" in bad.stderr, bad.stderr
    roles.write_text("[roles.trust]\nconformity = 0.7\nmemory = 0.5\n")
    bad = debate("dynamics", "simulate", "--roles", str(roles), "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "roles.trust: Value error, memory + conformity is 1.2: at most 1" in bad.stderr


TWO_CLASS = """seed = 7
[roles.initial]
factual_true = 0.75
hallucinated_true = 0.35
[roles.trust]
conformity = 0.6
[roles.skeptic]
conformity = 0.3
[roles.leader]
conformity = 0.5
[[classes]]
share = 0.6
factual_true = 0.92
hallucinated_true = 0.08
[[classes]]
share = 0.4
factual_true = 0.25
hallucinated_true = 0.75
"""


def test_the_commands_name_the_model_and_check_it_above_their_tables(tmp_path: Path) -> None:
    for name, text in (("two-class", TWO_CLASS), ("alike", TWO_CLASS.split("[[classes]]")[0])):
        (tmp_path / f"{name}.toml").write_text(text)
        for out, seed in ((name, "7"), (f"{name}-at", "8")):
            done = debate(
                "dynamics",
                "simulate",
                "--roles",
                str(tmp_path / f"{name}.toml"),
                "--n",
                "300",
                "--max-rounds",
                "4",
                "--seed",
                seed,
                "--out",
                str(tmp_path / out),
            )
            assert done.returncode == 0, done.stderr
        run, other = str(tmp_path / name), str(tmp_path / f"{name}-at")
        outputs = [
            debate("dynamics", "fit", run, "--bootstrap", "20"),
            debate("dynamics", "predict", run, "--chain", "always-trust", "--bootstrap", "20"),
            debate("dynamics", "validate", run, other, "--bootstrap", "20"),
        ]
        for done in outputs:
            assert done.returncode == 0, done.stderr
            head = done.stdout[: done.stdout.index("| ")]
            # the pooled turns show the unequal difficulty, which picks the mixture; every check then tests the
            # fitted model, which explains it: nothing to warn about
            pooled = "the heterogeneity check on the pooled turns fails" in head
            assert pooled is (name == "two-class"), head
            assert "WARNING" not in head, head
            described = "the fitted 2-class mixture" if name == "two-class" else "the fitted one-class model"
            assert "holds: G = " in head and f"runs of {described} give G" in head, head
            assert "model: " in head and "- markov (" in head
        assert ("a mixture of 2 item classes" in outputs[0].stdout) is (name == "two-class")
        for done in outputs:
            assert "self-consistency: the fitted setting (true-to-skeptic, min 2)" in done.stdout
        assert "| accuracy within |" in outputs[2].stdout and "| calls within |" in outputs[2].stdout
        assert "- overdispersion (" in outputs[2].stdout
    predicted = debate("dynamics", "predict", str(tmp_path / "alike"), "--json", "--bootstrap", "10")
    body = json.loads(predicted.stdout)
    assert set(body) == {"diagnostics", "self_check", "predictions"} and body["diagnostics"]["warnings"] == []


def test_the_docs_roles_files_are_the_example_populations() -> None:
    """docs/dynamics.md shows the `markov` and `two-class` populations as roles files: the tables beside them were
    measured on these."""
    text = (ROOT / "docs" / "dynamics.md").read_text()
    files = dict(re.findall(r"<!-- readme: file (\S+) -->\n```toml\n(.*?)```", text, re.S))
    for name, example in (("roles.toml", "markov"), ("two-class.toml", "two-class")):
        shown = Population.model_validate(tomllib.loads(files[name]))
        assert shown == EXAMPLES[example], name


def test_a_check_on_too_few_turns_says_not_applicable_rather_than_holds() -> None:
    def turn(i: int, earlier: bool) -> Observation:
        return Observation(
            item=f"i{i}",
            label=True,
            role="trust",
            state="S1",
            shown=(True,),
            earlier=earlier,
            verdict=i % 2 == 0,
            calls=1,
            position=2,
            initial=None,
        )

    # nine turns a side: under the 10-turn cells the chi-square reference needs
    few = markov_check([turn(i, i < 9) for i in range(18)])
    assert few.p_value is None and not few.rejected and few.detail.startswith("not applicable: no context")
    # the same split with ten a side is tested (and holds: the verdicts do not follow `earlier`)
    enough = markov_check([turn(i, i < 10) for i in range(20)])
    assert enough.df == 1 and enough.p_value is not None and not enough.rejected
