"""The posterior P(factual | a debate's turns) and the posterior stop's exact outcome, against brute-force
enumeration over every verdict sequence of small chains (each computed here from the chain driver's own plans, not
from the code under test)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from debate.engine import (
    ChainDriver,
    MarkovChain,
    PosteriorModel,
    RoleTables,
    TurnRecord,
    governed_outcome,
    governed_paths,
    governed_result,
    load_chain,
    transcript_result,
)
from debate.types import CallInfo, Opinion, Turn

CHAINS = ["true-to-skeptic", "always-trust", "true-to-trust"]


def _tables(rng: random.Random, chain: MarkovChain) -> RoleTables:
    """A role model with a distinct rate for every context the chain can show (no back-off involved)."""
    counts = []
    for state in chain.spec.states:
        for role in chain.roles(state):
            for label in (True, False):
                for k in range(4):
                    for shown in itertools.product((True, False), repeat=k):
                        n = 10.0
                        counts.append(((role, state, label, tuple(shown)), round(rng.uniform(0.5, 9.5), 3), n))
    return RoleTables.from_counts(counts)


def _model(seed: int, chain: MarkovChain, classes: int) -> PosteriorModel:
    rng = random.Random(seed)
    shares = {label: [rng.uniform(0.2, 1) for _ in range(classes)] for label in (True, False)}
    shares = {label: [s / sum(v) for s in v] for label, v in shares.items()}
    return PosteriorModel(
        classes=[_tables(rng, chain) for _ in range(classes)], shares=shares, prior=rng.uniform(0.2, 0.8)
    )


def _record(plan_state: str, round_: int, position: int, last: bool, role: str, verdict: bool) -> TurnRecord:
    opinion = Opinion(opinion="x", factuality=verdict, error_severity=0 if verdict else 3)
    turn = Turn.from_opinion(role, opinion, CallInfo(prompt="p", prompt_hash="0" * 64, attempts=1))
    return TurnRecord(state=plan_state, round=round_, position=position, last_in_state=last, turn=turn)


def _debate(
    chain: MarkovChain, verdicts: tuple[bool, ...]
) -> tuple[list[TurnRecord], list[tuple[str, str, tuple[bool, ...], bool]]]:
    """The records of a debate saying `verdicts` in order, and each turn's (role, state, shown, verdict) as the
    chain driver plans it."""
    driver = ChainDriver(chain)
    records: list[TurnRecord] = []
    contexts: list[tuple[str, str, tuple[bool, ...], bool]] = []
    for verdict in verdicts:
        plan = driver.next_turn(records)
        shown = tuple(p.opinion.factuality for p in plan.previous)
        contexts.append((plan.role, plan.state, shown, verdict))
        records.append(_record(plan.state, plan.round, plan.position, plan.last_in_state, plan.role, verdict))
    return records, contexts


def _brute_joint(model: PosteriorModel, contexts: list[tuple[str, str, tuple[bool, ...], bool]], label: bool) -> float:
    prior = model.prior if label else 1 - model.prior
    total = 0.0
    for component, share in zip(model.classes, model.shares[label], strict=True):
        product = prior * share
        for role, state, shown, verdict in contexts:
            p = component.p(role, state, label, shown)
            product *= p if verdict else 1 - p
        total += product
    return total


@pytest.mark.parametrize("chain_name", CHAINS)
@pytest.mark.parametrize("classes", [1, 2])
def test_the_posterior_is_bayes_rule_over_every_sequence(chain_name: str, classes: int) -> None:
    chain = load_chain(chain_name)
    model = _model(classes * 7 + len(chain_name), chain, classes)
    turns = 1 + 3 * 2  # S0 and two debate rounds
    expected_factual = 0.0
    for verdicts in itertools.product((True, False), repeat=turns):
        records, contexts = _debate(chain, verdicts)
        yes, no = _brute_joint(model, contexts, True), _brute_joint(model, contexts, False)
        p = model.p_debate(chain, records)
        assert p is not None
        assert p == pytest.approx(yes / (yes + no), rel=1e-9, abs=1e-12)
        expected_factual += (yes + no) * p
    # a posterior averaged over what the model predicts is the prior (a martingale): nothing lost, nothing invented
    assert expected_factual == pytest.approx(model.prior, rel=1e-9)


def _stopped(
    model: PosteriorModel, chain: MarkovChain, verdicts: tuple[bool, ...], threshold: float, max_rounds: int
) -> tuple[int, bool, bool] | None:
    """Where the posterior stop ends a debate saying `verdicts` (turns, verdict, capped), found turn by turn from
    the brute-force posterior; None when the sequence does not reach an end."""
    driver = ChainDriver(chain)
    records: list[TurnRecord] = []
    contexts: list[tuple[str, str, tuple[bool, ...], bool]] = []
    for verdict in verdicts:
        plan = driver.next_turn(records)
        contexts.append((plan.role, plan.state, tuple(p.opinion.factuality for p in plan.previous), verdict))
        records.append(_record(plan.state, plan.round, plan.position, plan.last_in_state, plan.role, verdict))
        yes, no = _brute_joint(model, contexts, True), _brute_joint(model, contexts, False)
        p = yes / (yes + no)
        if p >= threshold or p <= 1 - threshold:
            return len(records), p > 0.5, False
        if plan.last_in_state and plan.round >= max_rounds:
            return len(records), verdict if p == 0.5 else p > 0.5, True
    return None


@pytest.mark.parametrize("chain_name", CHAINS)
@pytest.mark.parametrize("threshold", [0.7, 0.9])
def test_the_posterior_stop_outcome_is_exact(chain_name: str, threshold: float) -> None:
    chain, max_rounds = load_chain(chain_name), 2
    governor = _model(3, chain, 2)
    truth = _model(11, chain, 1).classes[0]  # the agents behave otherwise than the governor believes
    paths = governed_paths(governor, chain, threshold=threshold, max_rounds=max_rounds)
    for label in (True, False):
        p_true = turns = capped = 0.0
        seen: set[tuple[bool, ...]] = set()
        for verdicts in itertools.product((True, False), repeat=1 + 3 * max_rounds):
            end = _stopped(governor, chain, verdicts, threshold, max_rounds)
            assert end is not None
            n, verdict, cap = end
            if verdicts[:n] in seen:
                continue
            seen.add(verdicts[:n])
            _, contexts = _debate(chain, verdicts[:n])
            w = math.prod(truth.p(r, s, label, sh) if v else 1 - truth.p(r, s, label, sh) for r, s, sh, v in contexts)
            p_true, turns, capped = p_true + w * verdict, turns + w * n, capped + w * cap
        got = governed_outcome(paths, truth, label=label)
        assert (got.p_true, got.turns, got.capped) == pytest.approx((p_true, turns, capped), rel=1e-9, abs=1e-12)


def test_a_governed_result_takes_the_posteriors_side_and_its_stop_reason() -> None:
    chain = load_chain("true-to-skeptic")
    records, _ = _debate(chain, (True, False, False))
    result = transcript_result(records)
    assert result.final is not None and result.final.factuality is False
    decided = governed_result(result, 0.95, 0.9)
    assert decided.stop_reason == "posterior"
    assert decided.final is not None and decided.final.factuality is True  # the latest opinion on the posterior's side
    # undecided, the debate ran to max_rounds: a last state that agreed did not stop it, and the verdict is the
    # posterior's side (0.4: false)
    capped, _ = _debate(chain, (True, False, False, False))
    ran_out = transcript_result(capped)
    assert ran_out.stop_reason == "consensus"
    undecided = governed_result(ran_out, 0.4, 0.9)
    assert undecided.stop_reason == "max_rounds"
    assert undecided.final is not None and undecided.final.factuality is False
    assert governed_result(ran_out, None, 0.9) == ran_out  # no posterior (a failed turn): nothing to govern
