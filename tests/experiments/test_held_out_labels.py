"""The labels' held-out test of a calibration (issue 75): each label scores the p_factual the file gives without
having shaped it, a correction is kept only where the labels it did not see lose less log loss with it, and a fit
the held-out labels reject is not calibrated, on the file."""

from __future__ import annotations

import numpy as np

from debate.calibration import HELD_OUT_LEVEL, Labels, not_calibrated
from experiments.dynamics.label_test import _held_out


def _labels(x: np.ndarray, y: np.ndarray, enough: bool) -> tuple[Labels, bool]:
    test, keep = _held_out(x, y, enough, 0)
    labels = Labels(claims=len(x) * 10, labelled=len(x), orientation="labels" if enough else "assumption")
    return labels.model_copy(update={"held_out": test}), keep


def test_a_fit_its_few_labels_reject_is_not_calibrated() -> None:
    rng = np.random.default_rng(0)
    x = np.full(20, 3.0) + rng.normal(0, 0.1, 20)  # p_factual about 0.95 on every claim
    y = (np.arange(20) % 2).astype(float)  # half of them hallucinated
    labels, keep = _labels(x, y, enough=False)
    assert not keep and labels.held_out is not None and labels.held_out.folds == 0
    assert labels.held_out.p_value < HELD_OUT_LEVEL
    line = labels.rejection_line()
    assert line is not None and line.startswith("the 20 labelled claims reject the fitted p_factual")
    assert "scored by the fit, which did not see them" in line
    assert line in not_calibrated([], 1, labels)


def test_a_correction_the_held_out_labels_confirm_is_kept_and_the_file_stays_calibrated() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 2, 400)
    y = (rng.uniform(size=400) < 1 / (1 + np.exp(x))).astype(float)  # the fit's orientation is backwards
    labels, keep = _labels(x, y, enough=True)
    assert keep and labels.held_out is not None and labels.held_out.folds == 5
    assert labels.held_out.log_loss < labels.held_out.log_loss_uncorrected
    assert labels.held_out.p_value >= HELD_OUT_LEVEL and labels.rejection_line() is None


def test_labels_that_agree_keep_no_correction() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(0, 2, 400)
    y = (rng.uniform(size=400) < 1 / (1 + np.exp(-x))).astype(float)  # the fit is right
    labels, keep = _labels(x, y, enough=True)
    assert labels.held_out is not None and labels.rejection_line() is None
    assert not keep and labels.held_out.folds == 0  # no fold found a correction worth its two parameters
