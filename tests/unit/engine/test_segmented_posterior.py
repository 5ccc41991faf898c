"""The cascade's posterior (debate.engine.SegmentedPosterior): each team's turns read by its own model, from where
the earlier teams left P(factual). Checked against what it must equal, not only that it runs."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from debate.engine import SegmentedPosterior, TurnContext, load_chain
from tests.unit.engine.test_posterior import CHAINS, _model

_TURNS = st.lists(
    st.tuples(st.sampled_from(["initial", "trust", "skeptic", "leader"]), st.booleans(), st.booleans()),
    min_size=1,
    max_size=12,
)


def _contexts(turns: list[tuple[str, bool, bool]]) -> list[TurnContext]:
    # A context per turn: its role, a state it speaks in, one verdict shown, its own verdict.
    return [TurnContext(role, "S0" if role == "initial" else "S1", (shown,), verdict) for role, shown, verdict in turns]


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


@given(turns=_TURNS, seed=st.integers(0, 10_000), cut=st.integers(0, 12), chain=st.sampled_from(CHAINS))
def test_one_class_split_anywhere_is_the_whole(
    turns: list[tuple[str, bool, bool]], seed: int, cut: int, chain: str
) -> None:
    """With one class, a debate's log-odds are the prior's plus each turn's log-likelihood ratio: reading it as two
    teams of the same model, cut anywhere, gives the whole debate's P(factual)."""
    model = _model(seed, load_chain(chain), classes=1)
    contexts = _contexts(turns)
    cut = min(cut, len(contexts))
    whole = model.p_factual(contexts)
    split = SegmentedPosterior([model, model], [0, cut]).p_factual(contexts)
    assert whole is not None and split is not None
    assert abs(_logit(min(max(split, 1e-12), 1 - 1e-12)) - _logit(min(max(whole, 1e-12), 1 - 1e-12))) < 1e-6


@given(turns=_TURNS, seed=st.integers(0, 10_000), cut=st.integers(1, 12), classes=st.integers(1, 3))
def test_a_later_team_starts_from_the_earlier_teams_posterior(
    turns: list[tuple[str, bool, bool]], seed: int, cut: int, classes: int
) -> None:
    """Team 2's part is its own model at the prior team 1 left: P(factual) of its turns alone under that prior."""
    chain = load_chain("true-to-skeptic")
    first, second = _model(seed, chain, classes), _model(seed + 1, chain, classes)
    contexts = _contexts(turns)
    cut = min(cut, len(contexts))
    before = first.p_factual(contexts[:cut])
    assert before is not None
    expected = second.at_prior(before).p_factual(contexts[cut:]) if cut < len(contexts) else before
    got = SegmentedPosterior([first, second], [0, cut]).p_factual(contexts)
    assert got is not None and expected is not None and abs(got - expected) < 1e-12


def test_at_prior_is_the_odds_shift_of_a_stated_base_rate() -> None:
    model = _model(3, load_chain("true-to-skeptic"), classes=2)
    contexts = _contexts([("trust", True, True), ("leader", True, False)])
    p = model.p_factual(contexts)
    moved = model.at_prior(0.9).p_factual(contexts)
    assert p is not None and moved is not None
    odds = _logit(moved) - _logit(p)
    assert abs(odds - (_logit(0.9) - _logit(model.prior))) < 1e-9
    assert model.at_prior(model.prior).p_factual(contexts) == p
