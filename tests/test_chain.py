from __future__ import annotations

import networkx as nx
import pytest

from debate.chain import ChainError, MarkovChain
from debate.termination import Consensus, MaxRounds, MinRounds, Progress, paper_termination


def test_default_chain_is_the_papers() -> None:
    chain = MarkovChain.build()
    assert chain.rule == "true-to-skeptic"
    assert chain.roles("S1") == ("trust", "skeptic", "leader")
    assert chain.roles("S2") == ("skeptic", "trust", "leader")
    for state in ("S0", "S1", "S2"):
        assert chain.next_state(state, True) == "S2"
        assert chain.next_state(state, False) == "S1"
    assert isinstance(chain.graph, nx.MultiDiGraph)
    assert chain.graph.number_of_edges() == 6


def test_custom_mapping_and_unknown_rule() -> None:
    assert MarkovChain.build({True: "S1", False: "S1"}).next_state("S2", False) == "S1"
    with pytest.raises(ChainError, match="unknown transition rule"):
        MarkovChain.build("sometimes-skeptic")  # type: ignore[arg-type]
    with pytest.raises(ChainError, match="no next state for verdict False"):
        MarkovChain.build({True: "S1"})  # type: ignore[dict-item]


def test_validation_rejects_bad_graphs() -> None:
    with pytest.raises(ChainError, match="back to S0"):
        MarkovChain.build({True: "S0", False: "S1"})  # type: ignore[dict-item]
    with pytest.raises(ChainError, match="then leader"):
        MarkovChain.build(
            states={"S0": ("initial",), "S1": ("trust", "leader", "skeptic"), "S2": ("skeptic", "trust", "leader")}
        )
    graph = MarkovChain.build().graph.copy()
    graph.remove_edge("S1", "S2", key=True)
    with pytest.raises(ChainError, match="exactly one transition per verdict"):
        MarkovChain(graph, rule="edited")


def test_termination_rules_compose() -> None:
    rule = paper_termination(min_rounds=2, max_rounds=4)
    assert not rule.should_stop(Progress(rounds=0, consensus=True))
    assert not rule.should_stop(Progress(rounds=1, consensus=True))
    assert rule.should_stop(Progress(rounds=2, consensus=True))
    assert not rule.should_stop(Progress(rounds=3, consensus=False))
    assert rule.should_stop(Progress(rounds=4, consensus=False))
    assert paper_termination(min_rounds=0, max_rounds=5).should_stop(Progress(rounds=0, consensus=True))
    custom = MaxRounds(3) | (MinRounds(1) & Consensus())
    assert custom.should_stop(Progress(rounds=1, consensus=True))
