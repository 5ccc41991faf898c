"""Debate dynamics on a simulated population run through the real engine: the fit recovers the parameters, the
exact prediction matches what the engine does, and the Markov check tells a Markov population from one with
memory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from debate.engine import PAPER_TRANSITION_RULES, load_chain
from experiments.dynamics import fit, markov_check, outcome, predict
from experiments.dynamics.predict import Setting
from experiments.dynamics.readers import read_run
from experiments.dynamics.simulate import Population, RoleParameters, observed_finals
from tests.support.helpers import debate
from tests.support.recorded import RunSpec, recorded, recorded_run

pytestmark = pytest.mark.slow  # starts processes

COPYING = RoleParameters(factual_true=0.7, hallucinated_true=0.4, conformity=0.5)
POPULATION = Population(
    roles={
        "initial": RoleParameters(factual_true=0.75, hallucinated_true=0.35),
        "trust": RoleParameters(factual_true=0.85, hallucinated_true=0.3, conformity=0.6),
        "skeptic": RoleParameters(factual_true=0.6, hallucinated_true=0.1, conformity=0.3),
        "leader": COPYING,
    },
    seed=7,
)


def _run(name: str, population: Population, chain: str, min_rounds: int, n: int, seed: int = 0) -> RunSpec:
    """A run of `population` through the real engine, recorded once (tests/support/recorded.py)."""
    return RunSpec(
        f"dynamics-{name}-{chain}-m{min_rounds}-n{n}-l{seed}", population, chain, min_rounds, 4, n, labels_seed=seed
    )


def _observed(spec: RunSpec) -> tuple[float, float, float]:
    """(P(final true | factual), P(final true | hallucinated), calls per claim) of the recorded run."""
    return observed_finals(recorded_run(spec).finals(spec.labels()))


def test_the_fit_recovers_the_populations_parameters_within_its_intervals() -> None:
    fitted = fit(
        recorded(_run("population", POPULATION, "true-to-skeptic", 2, 1200)),
        runs=["sim"],
        chain="true-to-skeptic",
        min_rounds=2,
        max_rounds=4,
        bootstrap=200,
        seed=1,
    )
    checked, missed = 0, []
    for context in fitted.contexts:
        if context.n < 100:
            continue
        truth = POPULATION.p(context.role, context.state, context.label, tuple(context.shown))
        checked += 1
        if not context.low <= truth <= context.high:
            missed.append((context, truth))
    # 95% intervals: about one context in twenty may miss, and then narrowly.
    assert checked >= 12 and len(missed) <= checked // 10, missed
    assert all(min(abs(t - c.low), abs(t - c.high)) < 0.03 for c, t in missed), missed
    trust = next(r for r in fitted.roles if r.role == "trust" and r.label)
    # conformity: repeats a wrong (false) opinion with P = 0.6 + 0.4 * P(own verdict false) = 0.6 + 0.4 * 0.15
    assert trust.conformity_interval is not None
    assert trust.conformity_interval[0] <= 0.66 <= trust.conformity_interval[1]
    markov = fitted.diagnostics.check("markov")
    assert markov is not None and not markov.rejected
    assert fitted.diagnostics.model.classes == 1 and not fitted.diagnostics.warnings


@pytest.mark.parametrize("chain", PAPER_TRANSITION_RULES)
def test_the_exact_prediction_is_what_the_engine_does(chain: str) -> None:
    """For every registered chain and min rounds 0-3: P(final true | label) and calls per claim from the exact
    computation with the true parameters, against the engine's debates at n = 400 per setting (within 4 standard
    errors)."""
    spec = load_chain(chain)
    for min_rounds in range(4):
        yes, no, calls = _observed(_run("population", POPULATION, chain, min_rounds, 400, seed=min_rounds))
        exact = [outcome(POPULATION, spec, min_rounds=min_rounds, max_rounds=4, label=label) for label in (True, False)]
        for p, seen in ((exact[0].p_true, yes), (exact[1].p_true, no)):
            assert abs(seen - p) <= 4 * math.sqrt(p * (1 - p) / 200) + 1e-9, (chain, min_rounds, seen, p)
        expected_calls = (exact[0].turns + exact[1].turns) / 2
        assert abs(calls - expected_calls) <= max(0.35, 0.05 * expected_calls), (chain, min_rounds, calls)


def test_the_markov_check_rejects_a_population_with_memory_and_accepts_one_without() -> None:
    remembering = Population(
        roles={
            **POPULATION.roles,
            "trust": RoleParameters(factual_true=0.8, hallucinated_true=0.3, memory=0.6),
            "skeptic": RoleParameters(factual_true=0.7, hallucinated_true=0.2, memory=0.6),
        },
        seed=3,
    )
    with_memory = markov_check(recorded(_run("remembering", remembering, "true-to-skeptic", 2, 600)))
    without = markov_check(recorded(_run("population", POPULATION, "true-to-skeptic", 2, 600)))
    assert with_memory.rejected and (with_memory.p_value or 1) < 1e-6 and (with_memory.df or 0) > 0
    assert not without.rejected and (without.p_value or 0) > 0.01


def test_predictions_from_one_run_match_other_settings_within_their_intervals() -> None:
    seen = recorded(_run("population", POPULATION, "true-to-skeptic", 2, 1000))
    settings = [Setting("true-to-skeptic", m, 4) for m in (0, 1, 3)] + [Setting("true-to-trust", 2, 4)]
    predicted = predict(seen, settings, share_true=0.5, bootstrap=100, seed=2)
    for i, (setting, p) in enumerate(zip(settings, predicted, strict=True)):
        # the same items, drawn independently of the fitted run (its own population seed), as `simulate --seed`
        independent = POPULATION.model_copy(update={"seed": 100 + i})
        yes, no, calls = _observed(_run(f"population-p{100 + i}", independent, setting.chain, setting.min_rounds, 1000))
        accuracy = 0.5 * yes + 0.5 * (1 - no)
        low, high = p.accuracy_interval
        # the observed run has its own sampling error: widen by its 2 standard errors
        margin = 2 * math.sqrt(accuracy * (1 - accuracy) / 1000)
        assert low - margin <= accuracy <= high + margin, (setting, accuracy, p.accuracy_interval)
        assert p.calls_interval[0] - 0.3 <= calls <= p.calls_interval[1] + 0.3, (setting, calls, p.calls_interval)


ROLES = """seed = 3
[roles.initial]
factual_true = 0.75
hallucinated_true = 0.35
[roles.trust]
conformity = 0.6
[roles.skeptic]
hallucinated_true = 0.1
conformity = 0.3
"""


def test_the_commands_simulate_over_http_fit_predict_plot_and_validate(tmp_path: Path) -> None:
    roles = tmp_path / "roles.toml"
    roles.write_text(ROLES)
    for chain, min_rounds, seed in (("true-to-skeptic", 2, []), ("always-trust", 1, ["--seed", "11"])):
        done = debate(
            "dynamics",
            "simulate",
            "--roles",
            str(roles),
            "--n",
            "150",
            "--chain",
            chain,
            "--min-rounds",
            str(min_rounds),
            "--max-rounds",
            "3",
            "--out",
            str(tmp_path / chain),
            *seed,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"150 simulated claims in {tmp_path / chain}: accuracy ")
    # --seed replaces the roles file's for the agents' draws: the same items and labels, independent verdicts.
    recorded = {c: json.loads((tmp_path / c / "config.json").read_text()) for c in ("true-to-skeptic", "always-trust")}
    assert [(r["provenance"]["seed"], r["provenance"]["labels_seed"]) for r in recorded.values()] == [(3, 3), (11, 3)]
    runs = {c: read_run(tmp_path / c) for c in recorded}
    labels = {c: {o.item: o.label for o in run.observations} for c, run in runs.items()}
    assert labels["true-to-skeptic"] == labels["always-trust"]
    first = {c: {o.item: o.verdict for o in run.observations if o.role == "initial"} for c, run in runs.items()}
    assert first["true-to-skeptic"] != first["always-trust"]
    fitted = debate("dynamics", "fit", str(tmp_path / "true-to-skeptic"), "--bootstrap", "20", "--json")
    assert fitted.returncode == 0, fitted.stderr
    result = json.loads(fitted.stdout)
    assert result["claims"] == 150 and result["chain"] == "true-to-skeptic" and result["calls_per_turn"] == 1.0
    initial = [c for c in result["contexts"] if c["role"] == "initial"]
    assert [(c["label"], c["n"]) for c in initial] == [(True, 75), (False, 75)]
    predicted = debate(
        "dynamics",
        "predict",
        str(tmp_path / "true-to-skeptic"),
        "--chain",
        "always-trust",
        "--min-rounds",
        "0..1",
        "--bootstrap",
        "20",
        "--out",
        str(tmp_path / "plots"),
    )
    assert predicted.returncode == 0, predicted.stderr
    assert (
        "| always-trust | consensus | 0 | 3 |" in predicted.stdout
        and "| always-trust | consensus | 1 | 3 |" in predicted.stdout
    )
    assert "self-consistency: the fitted setting (true-to-skeptic, min 2)" in predicted.stdout
    assert (tmp_path / "plots" / "predicted.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "plots" / "predicted.svg").read_text().lstrip().startswith("<?xml")
    checked = debate(
        "dynamics",
        "validate",
        str(tmp_path / "true-to-skeptic"),
        str(tmp_path / "always-trust"),
        "--bootstrap",
        "20",
        "--json",
    )
    assert checked.returncode == 0, checked.stderr
    [row] = json.loads(checked.stdout)["rows"]
    assert row["chain"] == "always-trust" and row["min_rounds"] == 1
    assert isinstance(row["within_accuracy"], bool) and isinstance(row["within_calls"], bool)
    again = debate("dynamics", "simulate", "--roles", str(roles), "--out", str(tmp_path / "always-trust"))
    assert again.returncode == 2 and "already holds a run" in again.stderr
    (tmp_path / "bad.toml").write_text("[roles.trust]\nconformity = 2\n")
    bad = debate("dynamics", "simulate", "--roles", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "roles.trust.conformity: Input should be less than or equal to 1" in bad.stderr
    # `debate report` reads a simulated run folder like any run, labelled as simulated, and a folder of runs too
    reported = debate("report", str(tmp_path / "true-to-skeptic"), "--format", "json")
    assert reported.returncode == 0 and "skipped" not in reported.stderr, reported.stderr
    [row] = json.loads(reported.stdout)
    assert row["setting"].startswith("simulated qa (agents of stated accuracies, not a model; true-to-skeptic")
    assert row["model"] == "simulated" and row["n"] == 150
    both = debate("report", str(tmp_path), "--format", "json")
    assert both.returncode == 0 and len(json.loads(both.stdout)) == 2, both.stderr
    assert "skipped" in debate("report", str(tmp_path / "plots"), str(tmp_path / "always-trust")).stderr
