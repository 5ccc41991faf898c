"""The calibration file: the role behaviour `debate dynamics fit --save` fitted, what it was fitted on, the checks of
its assumptions and what it knew of the truth; read and checked by `load_calibration` (cached while the file is
unchanged)."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from debate.calibration._checks import not_calibrated
from debate.calibration._composed import ComposedPart, Independence, composed_team, composition_said
from debate.calibration._parts import SMOOTHING, Check, FittedOn, Labels, _Model
from debate.engine import (
    Governor,
    IntervalGovernor,
    MarkovChain,
    PosteriorModel,
    PulledRoles,
    RoleModel,
    RoleTables,
    chain_digest,
)
from debate.errors import CalibrationError
from debate.provenance import package_version
from debate.types import ModelIdentity, name_of_label

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "Calibration",
    "CalibrationClass",
    "ContextCount",
    "FittedOn",
    "OwnCount",
    "PullCount",
    "load_calibration",
    "not_calibrated",
]

CALIBRATION_FORMAT = "markov-debate-calibration"
CALIBRATION_VERSION = 4
_READS = (1, 2, 3, 4, 5)
"""Version 2 added `labels` (fits without every label) and `Check.reference`; a version 1 file reads as fully
labelled, checked on the pooled turns. Version 3 weighs each unlabelled claim's turns by its label's probability
in the stored counts (version 2 counted them fully under both labels, so every claim scored alike) and records the
share's interval, a stated base rate and EM's convergence: a version 2 file of a fit with unlabelled claims is
refused, a fully labelled one reads. Version 4 fits its labelled claims inside EM, may hold the pulled family
(`CalibrationClass.family`) and records the labels' cross-validated test and the classes no label reaches; a
version 3 file reads as the tables family, its labels' test as it was. Version 5 is a team composed from each
model's own fit (`composed`: up to 3 classes per model, every combination of theirs)."""


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


class OwnCount(_Model):
    """In the pulled family: a role's turns decided on its own (not repeating what it was shown), within one class
    of items and label."""

    role: str
    label: bool
    true: float = Field(ge=0)
    n: float = Field(ge=0)


class PullCount(_Model):
    """In the pulled family: a role's turns shown a verdict, and those that repeated the last one shown."""

    role: str
    repeated: float = Field(ge=0)
    shown: float = Field(ge=0)


class CalibrationClass(_Model):
    """One latent class of items: its role behaviour as counts per context (tables), or as each role's own rates
    and pull (pulled)."""

    counts: list[ContextCount]
    """The weighted verdicts per context (what the tables family reads; kept for the pulled one too)."""
    family: Literal["tables", "pulled"] = "tables"
    """tables: a rate per context from `counts`; pulled: a role repeats the last verdict shown (`pull`) or decides
    with its own rate (`own`), whatever the state."""
    own: list[OwnCount] = Field(default_factory=list)
    pull: list[PullCount] = Field(default_factory=list)

    def roles(self, smoothing: float = SMOOTHING) -> RoleModel:
        """The behaviour p_factual reads, each rate smoothed by `smoothing` pseudo-counts a side (0: the fit's
        maximum-likelihood rates)."""
        a = smoothing
        if self.family == "pulled":
            return PulledRoles(
                own={(c.role, c.label): (c.true + a) / (c.n + 2 * a) for c in self.own},
                pull={c.role: (c.repeated + a) / (c.shown + 2 * a) if c.shown + 2 * a > 0 else 0.0 for c in self.pull},
            )
        return RoleTables.from_counts(
            (((c.role, c.state, c.label, tuple(c.shown)), c.true, c.n) for c in self.counts), pseudo=a
        )


class Calibration(_Model):
    """A fitted debate model, saved by `debate dynamics fit RUN --save FILE` (docs/schema.md)."""

    format: Literal["markov-debate-calibration"] = "markov-debate-calibration"
    version: Literal[1, 2, 3, 4, 5] = 4
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    package_version: str = Field(default_factory=package_version)
    fitted_on: FittedOn
    classes: list[CalibrationClass] = Field(min_length=1)
    """The latent classes of items, easiest first (one: every item alike); up to 3, or every combination of a
    composed team's models' classes."""
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
    composed: list[ComposedPart] = Field(default_factory=list)
    """A team composed from each model's own fit (version 5), its parts; empty: fitted on runs of the team."""
    independence: list[Independence] = Field(default_factory=list)
    """The tests of the composition's assumption, on claims two of its models both debated (none: not tested)."""
    _models: dict[tuple[float | None, float, bool], PosteriorModel] = PrivateAttr(default_factory=dict)
    _sha256: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _classes_fit_the_team(self) -> Calibration:
        most = 3 ** max(1, len(self.composed))
        if len(self.classes) > most:
            raise ValueError(f"{len(self.classes)} classes: a fit has at most 3 (3 per model of a composed team)")
        if self.composed and self.version < 5:
            raise ValueError("a composed calibration is version 5")
        return self

    @property
    def sha256(self) -> str | None:
        """The sha256 of the file as it was read (None: not read from a file)."""
        return self._sha256

    @property
    def calibrated(self) -> bool:
        return not self.not_calibrated

    def warning(self) -> str | None:
        """The line every report carries when p_factual is not calibrated, or rests on an assumption."""
        labels = self.labels
        assumption = labels.assumption(len(self.classes), self.fitted_on.factual_share) if labels is not None else None
        if self.composed:
            assumption = "; ".join(a for a in (self.composition_assumption(), assumption) if a)
        if self.calibrated:
            return assumption
        failed = "p_factual is not calibrated: " + "; ".join(self.not_calibrated)
        # what the fit assumes stays said beside what fails
        return failed if assumption is None else f"{failed}; {assumption}"

    @functools.cached_property
    def posterior(self) -> PosteriorModel:
        """The model P(factual | turns) is computed from (at the fitted run's share of factual claims)."""
        return self.model()

    def model(
        self, prior: float | None = None, *, smoothing: float = SMOOTHING, corrected: bool = True
    ) -> PosteriorModel:
        """The model P(factual | turns) is computed from, for traffic whose share of factual claims is `prior`
        (None: the fitted run's): its odds scale by (prior / (1 - prior)) / (fitted / (1 - fitted)), after any
        correction by labels (`corrected` False: none). Every context's rate is smoothed by `smoothing`
        pseudo-counts a side (0: the fit's own maximum-likelihood model, whose posterior is the fit's EM's)."""
        key = (prior, smoothing, corrected)
        if key in self._models:
            return self._models[key]
        classes = [k.roles(smoothing) for k in self.classes]
        shares = {True: self.shares["factual"], False: self.shares["hallucinated"]}
        fitted = self.fitted_on.factual_share
        fix = self.labels.recalibration if self.labels is not None and corrected else None
        slope, shift = (fix.slope, fix.shift) if fix is not None else (1.0, 0.0)
        if prior is not None:
            shift += math.log(prior / (1 - prior)) - math.log(fitted / (1 - fitted))
        model = PosteriorModel(classes=classes, shares=shares, prior=fitted, slope=slope, shift=shift)
        self._models[key] = model
        return model

    def stop_interval(self) -> tuple[float, float] | None:
        """The interval of shares of factual claims the stop holds over, when the base rate is the only reason
        p_factual is not calibrated (the fit's share interval is wider than MAX_SHARE_WIDTH); None otherwise."""
        labels = self.labels
        if labels is None or labels.share_interval is None:
            return None
        line = labels.base_rate_line()
        return labels.share_interval if line is not None and self.not_calibrated == [line] else None

    def ends(self, prior: float | None = None) -> PosteriorModel | tuple[PosteriorModel, PosteriorModel]:
        """What the stop reads a debate with: the model at `prior`, or, when the base rate is the only reason the
        file is not calibrated and no prior is stated, the model at the share interval's lowest and highest share
        (read in the worst case: debate.engine.worst_case)."""
        interval = self.stop_interval() if prior is None else None
        if interval is None:
            return self.model(prior)
        low, high = interval
        return self.model(min(max(low, 1e-6), 1 - 1e-6)), self.model(min(max(high, 1e-6), 1 - 1e-6))

    def governor(self, prior: float | None = None) -> Governor:
        """What the stop reads (`ends`), as one governor."""
        ends = self.ends(prior)
        return IntervalGovernor(ends[0], ends[1]) if isinstance(ends, tuple) else ends

    def describe(self) -> str:
        """What it was fitted on, in a line."""
        fitted = self.fitted_on
        classes = "one class of items" if len(self.classes) == 1 else f"{len(self.classes)} classes of items"
        labels = self.labels
        if labels is not None:
            classes += f"; {labels.labelled} of {labels.claims} claims labelled"
            if labels.labelled < labels.claims:
                classes += f"; {labels.share_said(fitted.factual_share)}"
        what = f"model {fitted.model}"
        if self.composed:
            what = f"composed team {composed_team(self.composed)}"
        return (
            f"{fitted.claims} claims of {', '.join(fitted.runs)} ({what}, chain {fitted.chain}, min "
            f"{fitted.min_rounds} max {fitted.max_rounds}); {classes}"
        )

    def composition_assumption(self) -> str | None:
        """What a composed team's p_factual assumes, in a line (None: fitted on runs of the team itself)."""
        return composition_said(self.composed, self.independence)

    def team_difference(self, team: dict[str, ModelIdentity], chain: MarkovChain) -> str | None:
        """How a run whose roles run on `team`'s models differs from the fitted team, naming the first role whose
        model or sampling settings differ; None: the same team. Models are compared by name and settings, never by
        a run's label (the same model is `gpt-4o` alone and `gpt-4o[temperature=0.7]` beside another)."""
        fitted = self.fitted_on
        one_model = not fitted.roles and len({i.name for i in team.values()}) <= 1
        for role in chain.spec.all_roles():
            now = team.get(role)
            if now is None:
                continue
            recorded = fitted.team.get(role)
            was = recorded.name if recorded is not None else name_of_label(fitted.roles.get(role, fitted.model))
            if was != now.name:
                if one_model:
                    return f"was fitted on model {was!r}; this run uses {now.name!r}"
                return f"was fitted with the {role} on model {was!r}; this run's {role} runs on {now.name!r}"
            if recorded is not None and now.sampling_differences(recorded.sampling()):
                return f"was fitted with the {role} at {now.differences_said(recorded.sampling())}"
        return None

    def check_use(
        self,
        *,
        team: dict[str, ModelIdentity] | None,
        prompts: dict[str, str],
        chain: MarkovChain,
        source: str,
        force_team: bool = False,
    ) -> str | None:
        """Refuse, in one line naming the difference, a run whose model (or a role's), prompts or chain differ from
        the fitted run's (`source`: how to name the calibration in the message; `team`: each role's model, None:
        not known yet).
        `force_team`: a team that differs is let through, and the difference returned (its p_factual is then not
        calibrated)."""
        fitted = self.fitted_on
        other_team = self.team_difference(team, chain) if team is not None else None
        if other_team is not None and not force_team:
            raise CalibrationError(f"{source} {other_team} (--debate.force-calibration-team to use it anyway)")
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
        return other_team


def _json_lines(text: str) -> bool:
    """Whether `text` is several JSON values, one a line (a results log), rather than one document."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return all(isinstance(json.loads(line), dict) for line in lines[:2])
    except ValueError:
        return False


@functools.lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int, size: int) -> Calibration:
    try:
        raw = Path(path).read_bytes()
        text = raw.decode("utf-8-sig")  # a byte-order mark reads, as in every other file option
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"calibration {path}: cannot be read ({exc})") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        if _json_lines(text):
            raise CalibrationError(
                f"calibration {path}: a results log (one JSON record a line), not a calibration file; make one "
                f"from it with `debate dynamics fit {path} --save FILE`"
            ) from exc
        raise CalibrationError(f"calibration {path}: cannot be read: not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"calibration {path}: not a calibration file (format is not {CALIBRATION_FORMAT!r})")
    if data.get("version") not in _READS:
        raise CalibrationError(
            f"calibration {path}: version {data.get('version')!r}; this markov-debate reads versions "
            f"{', '.join(map(str, _READS))} (fit it again with `debate dynamics fit RUN --save FILE`)"
        )
    labels = data.get("labels")
    if data.get("version") == 2 and isinstance(labels, dict) and labels.get("labelled") != labels.get("claims"):
        raise CalibrationError(
            f"calibration {path}: a version 2 fit with unlabelled claims, whose counts weighed every unlabelled claim "
            "fully under both labels (every claim scored alike); fit it again with `debate dynamics fit RUN --save "
            "FILE`"
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
    if not str(path).strip():
        raise CalibrationError(
            "calibration: an empty path; give the calibration file `debate dynamics fit --save` wrote"
        )
    file = Path(path)
    if file.is_dir():
        raise CalibrationError(
            f"calibration {path}: a folder; give the calibration file `debate dynamics fit --save` wrote"
        )
    try:
        stat = file.stat()
    except OSError as exc:
        raise CalibrationError(f"calibration {path}: cannot be read ({exc.strerror or exc})") from exc
    return _load(str(file), stat.st_mtime_ns, stat.st_size)
