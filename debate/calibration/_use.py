"""A calibration in use: read again whenever its file changes and checked before it scores, and the lines reports
and estimates carry about it."""

from __future__ import annotations

from debate.calibration._file import Calibration, load_calibration
from debate.config import DebateConfig
from debate.engine import MarkovChain
from debate.errors import CalibrationError
from debate.types import CalibrationNote, ModelIdentity

__all__ = ["LiveCalibration", "calibration_note", "describe_stop", "interval_said"]


class LiveCalibration:
    """A run's calibration file, read again whenever it changes on disk (`load_calibration` caches it while its
    mtime and size stay), so a long-running desk or guard takes a new fit without a restart. Each new file is
    checked as the first was (model, prompts, chain; the posterior stop's refusal) before it scores anything; one
    that does not fit fails the responses it would have scored, naming why, rather than scoring them wrongly."""

    def __init__(self, config: DebateConfig, chain: MarkovChain, prompts: dict[str, str]) -> None:
        assert config.calibration is not None
        self._config, self._chain, self._prompts = config, chain, prompts
        self._team: dict[str, ModelIdentity] | None = None
        self._checked: Calibration | None = None
        self.other_team: str | None = None
        """How this run's team differs from the fitted one, when `force_calibration_team` let it through."""
        self.current()

    def bind_team(self, team: dict[str, ModelIdentity]) -> None:
        """Check against each role's model (name and sampling settings) too, once the endpoints named them."""
        self._team, self._checked = dict(team), None
        self.current()

    def current(self) -> Calibration:
        """The file as it is now, checked.

        Raises:
            CalibrationError: it cannot be read, or cannot be used for this run (the message says why).
        """
        config = self._config
        calibration = load_calibration(str(config.calibration))
        if calibration is not self._checked:
            source = f"calibration {config.calibration}"
            self.other_team = calibration.check_use(
                team=self._team,
                prompts=self._prompts,
                chain=self._chain,
                source=source,
                force_team=config.force_calibration_team,
            )
            # a file whose only fault is an unpinned base rate is stopped on over its share interval (`governor`);
            # a stated prior does not pin what the fit's rates were estimated with, so it does not stand for that
            interval = calibration.stop_interval()
            refused = not calibration.calibrated and not config.force_calibration
            if config.threshold is not None and refused and (interval is None or config.prior is not None):
                hint = " or no --debate.prior: the stop then reads the share interval's worst case" if interval else ""
                raise CalibrationError(
                    f"--debate.stop {config.stop} refuses calibration {config.calibration}: {calibration.warning()} "
                    f"(--debate.force-calibration to stop on it anyway{hint})"
                )
            self._checked = calibration
        return calibration


def calibration_note(
    config: DebateConfig, calibration: Calibration, response_note: str | None, other_team: str | None = None
) -> CalibrationNote:
    """The line a report carries about its probabilities (`other_team`: how this run's team differs from the
    fitted one, when that was forced: not calibrated, and said first)."""
    warning = calibration.warning()
    if other_team is not None:
        warning = f"not calibrated: it {other_team}" + (f"; {warning}" if warning else "")
    said = interval_said(config, calibration)
    if said is not None:
        warning = f"{warning}; {said}" if warning else said
    return CalibrationNote(
        file=str(config.calibration),
        fitted_on=calibration.describe(),
        calibrated=calibration.calibrated and other_team is None,
        warning=warning,
        response_note=response_note,
        stop=config.stop,
        sha256=calibration.sha256,
        prior=config.prior if config.prior is not None else calibration.fitted_on.factual_share,
        share_interval=calibration.labels.share_interval if calibration.labels is not None else None,
        base_rate=calibration.labels.base_rate if calibration.labels is not None else None,
    )


def interval_said(config: DebateConfig, calibration: Calibration) -> str | None:
    """What the stop does with a file not calibrated for its base rate (None: it is, a prior is stated, or the run
    has no stop): it decides only where p_factual passes the threshold for every share in the interval."""
    interval = calibration.stop_interval() if config.prior is None else None
    if config.threshold is None or interval is None:
        return None
    low, high = interval
    return (
        f"the stop decides only where p_factual passes {config.threshold:g} for every share of factual claims in "
        f"[{low:.3f}, {high:.3f}] (p_factual at {low:.3f} >= {config.threshold:g}, or at {high:.3f} <= "
        f"{1 - config.threshold:g}); p_factual is said at the fitted share"
    )


def describe_stop(config: DebateConfig) -> str:
    """The stop rule a run's turns end by, in a line (the paper's consensus, or the posterior stop and the
    calibration that decides it)."""
    if config.threshold is None or config.calibration is None:
        return (
            f"consensus (the paper's rule): a state's speakers agree from round {config.min_rounds}, else round "
            f"{config.max_rounds} ends it"
        )
    calibration = load_calibration(config.calibration)
    prior = config.prior if config.prior is not None else calibration.fitted_on.factual_share
    said = f"; {calibration.warning()}" if calibration.warning() else ""
    interval = interval_said(config, calibration)
    said += f"; {interval}" if interval else ""
    return (
        f"{config.stop}: after each turn, p_factual >= {config.threshold:g} or <= {1 - config.threshold:g} ends the "
        f"debate, else round {config.max_rounds}; decided by {config.calibration} ({calibration.describe()}; prior "
        f"{prior:.3f}){said}"
    )
