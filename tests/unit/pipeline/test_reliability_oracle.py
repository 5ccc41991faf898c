"""ECE, Brier and the reliability bins a user reads (`debate dynamics fit`, the desk's calibration panel, the
guard's calibration check) against a direct computation from their definitions on generated probabilities and
labels: each bin selected by its own edges, Brier from scikit-learn. A wrong formula (an off-by-one bin, ECE
without the bin's weight, Brier on the wrong side) fails here; the notes of issue 66 record the mutations tried."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sklearn.metrics import brier_score_loss

from debate.calibration import reliability
from debate.errors import UsageError

# probabilities as the calibration makes them, plus every bin edge and its neighbours one ulp either side
_EDGES = [k / 10 for k in range(11)]
_P = st.floats(0, 1) | st.sampled_from(
    [e for k in _EDGES for e in (k, math.nextafter(k, 0), math.nextafter(k, 1)) if 0 <= e <= 1]
)
_PAIRS = st.lists(st.tuples(_P, st.booleans()), min_size=1, max_size=60)


def _by_definition(pairs: list[tuple[float, bool]]) -> tuple[float, list[tuple[float, float, int]]]:
    """ECE and bins straight from the definition: bin k holds k/10 <= p < (k+1)/10 (the last also p = 1)."""
    n, ece, table = len(pairs), 0.0, []
    for k in range(10):
        lo, hi = k / 10, (k + 1) / 10
        inside = [(p, y) for p, y in pairs if lo <= p < hi or (k == 9 and p == 1.0)]
        if not inside:
            continue
        mean_p = sum(p for p, _ in inside) / len(inside)
        share = sum(y for _, y in inside) / len(inside)
        table.append((mean_p, share, len(inside)))
        ece += len(inside) / n * abs(mean_p - share)
    return ece, table


def _flat(table: list[tuple[float, float, int]]) -> list[float]:
    return [value for row in table for value in row]


@given(pairs=_PAIRS)
@example(pairs=[(0.8999999999999999, True)])  # found: int(p * 10) put it in the last bin, above its edge
@example(pairs=[(1.0, False), (0.0, True)])
def test_ece_brier_and_bins_match_their_definitions(pairs: list[tuple[float, bool]]) -> None:
    got = reliability(pairs)
    ece, table = _by_definition(pairs)
    assert got.claims == len(pairs)
    assert [count for _, _, count in got.bins] == [count for _, _, count in table]
    assert _flat(got.bins) == pytest.approx(_flat(table), abs=1e-12)
    assert got.ece == pytest.approx(ece, abs=1e-12)
    labels = [int(y) for _, y in pairs]
    assert got.brier == pytest.approx(brier_score_loss(labels, [p for p, _ in pairs], pos_label=1), abs=1e-12)
    assert 0 <= got.ece <= 1 and 0 <= got.brier <= 1


def test_a_hand_computed_table() -> None:
    """Four claims worked by hand: bins [0.1, 0.2) and [0.9, 1.0]; ECE = 2/4 x |0.15 - 0.5| + 2/4 x |0.95 - 1|."""
    got = reliability([(0.1, True), (0.2 - 1e-9, False), (0.9, True), (1.0, True)])
    assert _flat(got.bins) == pytest.approx([0.15 - 0.5e-9, 0.5, 2, 0.95, 1.0, 2])
    assert got.ece == pytest.approx(0.5 * 0.35 + 0.5 * 0.05)
    assert got.brier == pytest.approx((0.81 + (0.2 - 1e-9) ** 2 + 0.01 + 0) / 4)


def test_no_pair_is_a_usage_error_naming_the_flag() -> None:
    with pytest.raises(UsageError, match=r"--debate\.calibration"):
        reliability([])
