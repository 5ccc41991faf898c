"""The calibration file: the role behaviour `debate dynamics fit --save` fitted on a labelled run, what it was fitted
on, and the checks of its assumptions. A run given `--debate.calibration FILE` reports P(factual | the debate's
turns) per claim (debate.engine.PosteriorModel), and `--debate.stop posterior:P` ends a debate once that
probability is decided.

A calibration holds only for the model, prompts and chain it was fitted on: anything else is refused in one line
(`check_use`). When a check of the model's assumptions failed on the fitted run, the probability is not calibrated:
every report says so and names the check (`not_calibrated`), and the posterior stop refuses it unless forced.
"""

from debate.calibration._composed import ComposedPart, Independence
from debate.calibration._file import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    Calibration,
    CalibrationClass,
    ContextCount,
    FittedOn,
    OwnCount,
    PullCount,
    load_calibration,
    not_calibrated,
)
from debate.calibration._parts import (
    HELD_OUT_LEVEL,
    MAX_SHARE_WIDTH,
    MIN_LABELS,
    SMOOTHING,
    Check,
    HeldOut,
    LabelAsk,
    Labels,
    Recalibration,
    Reliability,
    em_stopped_line,
    labels_for_share,
    reliability,
)
from debate.calibration._use import LiveCalibration, calibration_note, describe_stop
from debate.errors import CalibrationError
from debate.types import StopRule, parse_stop

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "HELD_OUT_LEVEL",
    "MAX_SHARE_WIDTH",
    "MIN_LABELS",
    "SMOOTHING",
    "Calibration",
    "CalibrationClass",
    "CalibrationError",
    "Check",
    "ComposedPart",
    "ContextCount",
    "FittedOn",
    "HeldOut",
    "Independence",
    "LabelAsk",
    "Labels",
    "LiveCalibration",
    "OwnCount",
    "PullCount",
    "Recalibration",
    "Reliability",
    "StopRule",
    "calibration_note",
    "describe_stop",
    "em_stopped_line",
    "labels_for_share",
    "load_calibration",
    "not_calibrated",
    "parse_stop",
    "reliability",
]
