"""The calibration file: the role behaviour `debate dynamics fit --save` fitted on a labelled run, what it was fitted
on, and the checks of its assumptions. A run given `--debate.calibration FILE` reports P(factual | the debate's
turns) per claim (debate.engine.PosteriorModel), and `--debate.stop posterior:P` ends a debate once that
probability is decided.

A calibration holds only for the model, prompts and chain it was fitted on: anything else is refused in one line
(`check_use`). When a check of the model's assumptions failed on the fitted run, the probability is not calibrated:
every report says so and names the check (`not_calibrated`), and the posterior stop refuses it unless forced.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from debate.config import DebateConfig
from debate.engine import MarkovChain, PosteriorModel, RoleTables, chain_digest
from debate.errors import CalibrationError
from debate.provenance import package_version
from debate.types import CalibrationNote, StopRule, parse_stop

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "MIN_LABELS",
    "SMOOTHING",
    "Calibration",
    "CalibrationClass",
    "CalibrationError",
    "Check",
    "ContextCount",
    "FittedOn",
    "Labels",
    "LiveCalibration",
    "Recalibration",
    "StopRule",
    "calibration_for",
    "calibration_note",
    "load_calibration",
    "parse_stop",
]

CALIBRATION_FORMAT = "markov-debate-calibration"
CALIBRATION_VERSION = 2
_READS = (1, 2)
"""Version 2 added `labels` (fits without every label) and `Check.reference`; a version 1 file reads as fully
labelled, checked on the pooled turns."""

UNCALIBRATING_CHECKS = ("markov", "state")
"""Checks whose failure leaves p_factual uncalibrated whatever the model (memory; behaviour that differs by state).
Heterogeneity and overdispersion do too when the model has one class (it assumes items alike)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Check(_Model):
    """One test of the model's assumptions."""

    name: Literal["markov", "heterogeneity", "overdispersion", "state"]
    statistic: float | None
    """G (likelihood ratio) or Z (Tarone); None when the check does not apply."""
    df: int | None
    p_value: float | None
    level: float
    """The p-value under which the check fails."""
    rejected: bool
    """At its level: the assumption fails on this run."""
    detail: str
    """What was tested on what, and what it found, in a line."""
    reference: Literal["chi-square", "fitted model"] = "chi-square"
    """What the statistic is compared with: the chi-square of the pooled test, or the same test on runs of the
    fitted model (which holds its item classes: agreement from shared difficulty is expected there)."""


class Recalibration(_Model):
    """How labelled claims corrected the fitted log-odds: a logistic regression of each label on the fit's log-odds
    of its claim, kept when it fits the labels better than the fit alone (likelihood ratio, 2 df, at 5%)."""

    slope: float
    shift: float
    labelled: int
    """The labelled claims it was fitted on."""
    statistic: float
    """The likelihood ratio against no correction (slope 1, shift 0)."""
    p_value: float


class Labels(_Model):
    """What a fit knew of its claims' truth: labels, or the assumption that stands in for them."""

    claims: int
    """Debated claims fitted."""
    labelled: int
    """Those with a true label (the rest: the truth was fitted as latent)."""
    orientation: Literal["labels", "assumption"]
    """labels: enough labelled claims (`MIN_LABELS`, both labels) to say which verdicts are right and to correct the
    fit's probabilities; assumption: fewer, and the agents are taken to be right more often than wrong."""
    agreement: str | None = None
    """How the labelled claims agree with the fitted p_factual before any correction (Spiegelhalter's Z), in a
    line."""
    recalibration: Recalibration | None = None
    """The correction the labels brought (None: none was needed, or too few labels)."""
    needed: int = Field(default=0, ge=0)
    """More labelled claims needed before the labels decide (0: enough)."""
    to_label: list[str] = Field(default_factory=list)
    """The claims (item/claim id) to label first: spread over the fitted p_factual, which fits the correction with
    the fewest labels (choosing by p_factual does not bias it: the label is regressed on it)."""

    def assumption(self, classes: int) -> str | None:
        """The line a verdict carries when the fit leans on the assumption (None: labels settle it)."""
        if self.orientation == "labels":
            return None
        return (
            f"fitted without labels on {self.claims - self.labelled} of {self.claims} claims: p_factual assumes the "
            "agents are right more often than wrong"
            + ("" if classes == 1 else " in every class of items")
            + f", which only labels can test (label {self.needed} more claims: {_first(self.to_label)})"
        )


def _first(claims: list[str], shown: int = 5) -> str:
    return ", ".join(claims[:shown]) + (", ..." if len(claims) > shown else "")


MIN_LABELS = 30
"""Labelled claims (at least 5 of each label) before labels, not the assumption, decide: fewer cannot fit the
two-parameter correction. docs/dynamics.md shows what more buy."""
SMOOTHING = 0.5
"""Pseudo-counts on each side of every context's verdicts in p_factual (Jeffreys' prior): a context seen 3 times,
always "true", gives (3 + 0.5) / (3 + 1) = 0.875, not 1, so no thin context makes p_factual exactly 0 or 1."""


class ContextCount(_Model):
    """A role's weighted verdicts in one context, within one class of items."""

    role: str
    state: str
    label: bool
    """The claim's true label (True: factual)."""
    shown: list[bool]
    """The verdicts the speaker was shown, in order."""
    true: float = Field(ge=0)
    """Weighted "true" verdicts."""
    n: float = Field(ge=0)
    """Weighted turns (a mixture splits an item's turns over classes by its responsibilities)."""


class CalibrationClass(_Model):
    """One latent class of items: its role behaviour as counts per context."""

    counts: list[ContextCount]


class FittedOn(_Model):
    """What the calibration was fitted on: a run that differs in model, prompts or chain cannot use it."""

    model: str
    """The model name the fitted run sent."""
    prompts: dict[str, str]
    """Prompt name -> sha256, as the fitted run recorded them."""
    chain: str
    """The chain's name."""
    chain_sha256: str
    """What the chain does (debate.engine.chain_digest): states, speakers, transitions, what each role is shown."""
    min_rounds: int
    max_rounds: int
    claims: int
    """Debated claims fitted."""
    turns: int
    factual_share: float = Field(gt=0, lt=1)
    """The share of factual claims among them: the prior of the posterior."""
    runs: list[str]
    """The run folders fitted."""


class Calibration(_Model):
    """A fitted debate model, saved by `debate dynamics fit RUN --save FILE` (docs/schema.md)."""

    format: Literal["markov-debate-calibration"] = "markov-debate-calibration"
    version: Literal[1, 2] = 2
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    package_version: str = Field(default_factory=package_version)
    fitted_on: FittedOn
    classes: list[CalibrationClass] = Field(min_length=1, max_length=3)
    """The latent classes of items, easiest first (one: every item alike)."""
    shares: dict[Literal["factual", "hallucinated"], list[float]]
    """Per true label, the share of items in each class."""
    model_reason: str
    """Why this number of classes."""
    calls_per_turn: float = Field(gt=0)
    """Model calls per turn on the fitted run (re-asks included): what expected calls are scaled by."""
    checks: list[Check]
    """The checks of the model's assumptions on the fitted run."""
    not_calibrated: list[str]
    """Each failed check that leaves p_factual uncalibrated, as a line naming it (empty: calibrated)."""
    labels: Labels | None = None
    """What the fit knew of the truth (None, as in version 1 files: every claim labelled)."""
    _models: dict[float | None, PosteriorModel] = PrivateAttr(default_factory=dict)
    _sha256: str | None = PrivateAttr(default=None)

    @property
    def sha256(self) -> str | None:
        """The sha256 of the file as it was read (None: not read from a file)."""
        return self._sha256

    @property
    def calibrated(self) -> bool:
        return not self.not_calibrated

    def warning(self) -> str | None:
        """The line every report carries when p_factual is not calibrated, or rests on an assumption."""
        if self.calibrated:
            return self.labels.assumption(len(self.classes)) if self.labels is not None else None
        return "p_factual is not calibrated: " + "; ".join(self.not_calibrated)

    @functools.cached_property
    def posterior(self) -> PosteriorModel:
        """The model P(factual | turns) is computed from (at the fitted run's share of factual claims)."""
        return self.model()

    def model(self, prior: float | None = None) -> PosteriorModel:
        """The model P(factual | turns) is computed from, for traffic whose share of factual claims is `prior`
        (None: the fitted run's): its odds scale by (prior / (1 - prior)) / (fitted / (1 - fitted)), after any
        correction by labels. Every context's rate is smoothed (`SMOOTHING`)."""
        if prior in self._models:
            return self._models[prior]
        classes = [
            RoleTables.from_counts(
                (((c.role, c.state, c.label, tuple(c.shown)), c.true, c.n) for c in k.counts), pseudo=SMOOTHING
            )
            for k in self.classes
        ]
        shares = {True: self.shares["factual"], False: self.shares["hallucinated"]}
        fitted = self.fitted_on.factual_share
        fix = self.labels.recalibration if self.labels is not None else None
        slope, shift = (fix.slope, fix.shift) if fix is not None else (1.0, 0.0)
        if prior is not None:
            shift += math.log(prior / (1 - prior)) - math.log(fitted / (1 - fitted))
        model = PosteriorModel(classes=classes, shares=shares, prior=fitted, slope=slope, shift=shift)
        self._models[prior] = model
        return model

    def describe(self) -> str:
        """What it was fitted on, in a line."""
        fitted = self.fitted_on
        classes = "one class of items" if len(self.classes) == 1 else f"{len(self.classes)} classes of items"
        if self.labels is not None:
            classes += f"; {self.labels.labelled} of {self.labels.claims} claims labelled"
        return (
            f"{fitted.claims} claims of {', '.join(fitted.runs)} (model {fitted.model}, chain {fitted.chain}, min "
            f"{fitted.min_rounds} max {fitted.max_rounds}); {classes}"
        )

    def check_use(self, *, model: str | None, prompts: dict[str, str], chain: MarkovChain, source: str) -> None:
        """Refuse, in one line naming the difference, a run whose model, prompts or chain differ from the fitted
        run's (`source`: how to name the calibration in the message; `model` None: not known yet)."""
        fitted = self.fitted_on
        if model is not None and model != fitted.model:
            raise CalibrationError(f"{source} was fitted on model {fitted.model!r}; this run uses {model!r}")
        if chain_digest(chain) != fitted.chain_sha256:
            raise CalibrationError(
                f"{source} was fitted on chain {fitted.chain!r}; this run's chain {chain.name!r} differs "
                "(states, speakers, transitions or what a role is shown)"
            )
        changed = sorted(n for n in set(prompts) | set(fitted.prompts) if prompts.get(n) != fitted.prompts.get(n))
        if changed:
            raise CalibrationError(
                f"{source} was fitted on other prompts: {', '.join(changed)} differ (sha256 of the prompt files)"
            )


def not_calibrated(checks: list[Check], classes: int, labels: Labels | None = None) -> list[str]:
    """The failed checks that leave p_factual uncalibrated (see `UNCALIBRATING_CHECKS`), each as a line. A check
    against the fitted model (`Check.reference`) holds its item classes, so with classes its heterogeneity check
    counts too: the mixture does not explain the items' difficulty. A fit with several classes and too few labels
    is not calibrated either: the assumption that stands in for labels is false for a class that fools the agents."""
    against = {c.name for c in checks if c.reference == "fitted model"}
    names: tuple[str, ...] = UNCALIBRATING_CHECKS
    if classes == 1:
        names = (*names, "heterogeneity", "overdispersion")
    elif "heterogeneity" in against:
        names = (*names, "heterogeneity")
    why = {
        "markov": "the agents remember earlier opinions",
        "state": "a role behaves differently by state",
        "heterogeneity": "items differ in difficulty and the model has one class"
        if classes == 1
        else f"items differ in difficulty more than the {classes} classes explain",
        "overdispersion": "items differ in difficulty and the model has one class",
    }

    def cause(check: Check) -> str:
        # pooled over classes, shared difficulty alone can fail the Markov and state checks: said, not hidden
        shared = classes > 1 and check.name in UNCALIBRATING_CHECKS and check.name not in against
        return why[check.name] + (" or items of unequal difficulty" if shared else "")

    lines = [f"the {c.name} check fails ({cause(c)}: {c.detail})" for c in checks if c.rejected and c.name in names]
    if labels is not None and labels.orientation == "assumption" and classes > 1:
        lines.append(
            f"{classes} classes of items and {labels.labelled} labelled claims: which verdicts are right in each "
            f"class is not known (label {labels.needed} more claims: {_first(labels.to_label)})"
        )
    return lines


@functools.lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int, size: int) -> Calibration:
    try:
        raw = Path(path).read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CalibrationError(f"calibration {path}: cannot be read ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"calibration {path}: not a calibration file (format is not {CALIBRATION_FORMAT!r})")
    if data.get("version") not in _READS:
        raise CalibrationError(
            f"calibration {path}: version {data.get('version')!r}; this markov-debate reads versions "
            f"{', '.join(map(str, _READS))} (fit it again with `debate dynamics fit RUN --save FILE`)"
        )
    try:
        calibration = Calibration.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CalibrationError(f"calibration {path}: {where}: {first['msg']}") from exc
    calibration._sha256 = hashlib.sha256(raw).hexdigest()
    return calibration


def load_calibration(path: str | Path) -> Calibration:
    """Read and check a calibration file (cached while the file is unchanged).

    Raises:
        CalibrationError: unreadable, another format or version, or a field out of place (named).
    """
    file = Path(path)
    try:
        stat = file.stat()
    except OSError as exc:
        raise CalibrationError(f"calibration {path}: cannot be read ({exc.strerror or exc})") from exc
    return _load(str(file), stat.st_mtime_ns, stat.st_size)


class LiveCalibration:
    """A run's calibration file, read again whenever it changes on disk (`load_calibration` caches it while its
    mtime and size stay), so a long-running desk or guard takes a new fit without a restart. Each new file is
    checked as the first was (model, prompts, chain; the posterior stop's refusal) before it scores anything; one
    that does not fit fails the responses it would have scored, naming why, rather than scoring them wrongly."""

    def __init__(self, config: DebateConfig, chain: MarkovChain, prompts: dict[str, str]) -> None:
        assert config.calibration is not None
        self._config, self._chain, self._prompts = config, chain, prompts
        self._model: str | None = None
        self._checked: Calibration | None = None
        self.current()

    def bind_model(self, model: str) -> None:
        """Check against the model too, once the endpoint named it."""
        self._model, self._checked = model, None
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
            calibration.check_use(model=self._model, prompts=self._prompts, chain=self._chain, source=source)
            if config.threshold is not None and not calibration.calibrated and not config.force_calibration:
                raise CalibrationError(
                    f"--debate.stop {config.stop} refuses calibration {config.calibration}: {calibration.warning()} "
                    "(--debate.force_calibration to stop on it anyway)"
                )
            self._checked = calibration
        return calibration


def calibration_for(config: DebateConfig, chain: MarkovChain, prompts: dict[str, str]) -> Calibration | None:
    """The run's calibration, read and checked against its chain and prompts (the model is checked once known);
    None without one.

    Raises:
        CalibrationError: unreadable, fitted on another chain or prompts, or (under the posterior stop) failing its
            checks without `force_calibration`.
    """
    if config.calibration is None:
        return None
    calibration = load_calibration(config.calibration)
    calibration.check_use(model=None, prompts=prompts, chain=chain, source=f"calibration {config.calibration}")
    if config.threshold is not None and not calibration.calibrated and not config.force_calibration:
        raise CalibrationError(
            f"--debate.stop {config.stop} refuses calibration {config.calibration}: {calibration.warning()} "
            "(--debate.force_calibration to stop on it anyway)"
        )
    return calibration


def calibration_note(config: DebateConfig, calibration: Calibration, response_note: str | None) -> CalibrationNote:
    """The line a report carries about its probabilities."""
    return CalibrationNote(
        file=str(config.calibration),
        fitted_on=calibration.describe(),
        calibrated=calibration.calibrated,
        warning=calibration.warning(),
        response_note=response_note,
        stop=config.stop,
        sha256=calibration.sha256,
        prior=config.prior if config.prior is not None else calibration.fitted_on.factual_share,
    )
