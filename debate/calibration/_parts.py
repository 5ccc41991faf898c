"""The parts of a calibration file that say what a fit knew and how well it holds: the checks of its assumptions,
what labels it had (and the assumption that stands in for them), and the reliability of p_factual on labelled
claims."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.errors import UsageError
from debate.types import ModelIdentity

__all__ = [
    "MAX_SHARE_WIDTH",
    "MIN_LABELS",
    "SMOOTHING",
    "Check",
    "FittedOn",
    "Labels",
    "Recalibration",
    "Reliability",
    "em_stopped_line",
    "first",
    "labels_for_share",
    "reliability",
]


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


class HeldOut(_Model):
    """The labels' test of the p_factual a file gives, each label scored by a fit that did not see it (k-fold
    cross-validation: the fit with its fold's labels hidden) and, where a correction is kept, by the correction
    fitted on the other folds."""

    labelled: int
    """The labelled claims scored."""
    fit_folds: int = 0
    """Folds of the fit's cross-validation (0: a fit that saw no label scored them all, as files before it did)."""
    folds: int
    """Folds of the correction's cross-validation (0: no correction was fitted)."""
    z: float
    """Spiegelhalter's Z of the held-out labels against their held-out p_factual."""
    p_value: float
    """Its two-sided p-value; under HELD_OUT_LEVEL the labels reject the file's p_factual."""
    log_loss: float
    """Mean held-out log loss of the p_factual the file gives."""
    log_loss_uncorrected: float
    """The same of the fit's p_factual with no correction (a correction is kept only when it is lower)."""


HELD_OUT_LEVEL = 0.05
"""The level under which held-out labels reject a file's p_factual: it is then not calibrated."""


class LabelAsk(_Model):
    """One claim whose label is worth asking for, and why (`Labels.label_next`)."""

    claim: str
    """The claim as the fit names it (`KEY/CLAIM_ID`: a results log's item key, or `audit-N` for the desk's)."""
    reason: str
    """Why it is asked for, in a line."""
    gain: float | None = Field(default=None, ge=0)
    """The share of the summed variance of p_factual over the unlabelled claims its label is expected to remove,
    at its place in the order (None: asked for another reason)."""
    p_factual: float | None = Field(default=None, ge=0, le=1)
    """Its p_factual under the fit (None: not computed)."""


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
    """The claims (item/claim id) to label first: the most typical claims of each class no label reaches
    (`unreached`), then, while labels are too few, claims spread over the fitted p_factual, which fits the
    correction with the fewest labels (choosing by p_factual does not bias it: the label is regressed on it)."""
    base_rate: float | None = Field(default=None, gt=0, lt=1)
    """The share of factual claims as the user stated it (`debate dynamics fit --base-rate P`), held fixed in EM
    (None: fitted from the turns)."""
    share_interval: tuple[float, float] | None = None
    """The 95% profile-likelihood interval of the fitted share of factual claims: what the turns can tell of it
    (None: stated, or a file from before it was recorded)."""
    share_standard_error: float | None = Field(default=None, ge=0)
    """The fitted share's standard error (observed Fisher information); it shrinks as 1 / sqrt(claims)."""
    em_steps: int | None = Field(default=None, ge=0)
    """EM steps the fit took (and the quasi-Newton search's evaluations after EM's cap, where it went on)."""
    em_converged: bool = True
    """False: neither EM nor the quasi-Newton search after its cap converged (the fit is not its maximum)."""
    held_out: HeldOut | None = None
    """The labels' held-out test of the file's p_factual (None: no labelled claim, or a file from before it)."""
    unreached: list[str] = Field(default_factory=list)
    """The clusters of claims (label and class) no labelled claim falls in: which verdicts are right there rests on
    the assumption, and the file is not calibrated until labels reach them."""
    label_next: list[LabelAsk] = Field(default_factory=list)
    """The unlabelled claims worth labelling next, in order, each with its reason: while labels are few a spread
    over p_factual, then the most typical claims of each class no label reaches, then by the expected fall of
    p_factual's variance, spread over p_factual (experiments.dynamics.worth)."""
    p_error: float | None = Field(default=None, ge=0)
    """The root-mean-square standard error of p_factual over the unlabelled claims (None: not computed)."""
    label_next_needed: int | None = Field(default=None, ge=0)
    """Labels in the `label_next` order (continued past the list) that are expected to bring `p_error` to
    `target_error` (0: there already; None: not within every unlabelled claim, or not computed)."""
    target_error: float | None = Field(default=None, gt=0)
    """The `p_error` the order aims at."""
    followed: int = Field(default=0, ge=0)
    """Claims the order was followed for when counting `label_next_needed`."""
    label_order: Literal["variance", "random"] = "variance"
    """How `label_next` goes on past its first two parts: a seeded random sample (what `debate dynamics fit` writes
    by default) or by the expected fall of p_factual's variance (`--label-order variance`). Every fit writes it; left
    out, the file predates the field, when the variance order was the only one."""

    def label_next_line(self) -> str | None:
        """How many labels, in which order, would settle p_factual (None: no order computed)."""
        if not self.label_next and self.p_error is None:
            return None
        error = "unknown" if self.p_error is None else f"{self.p_error:.3f}"
        if self.orientation == "assumption":
            # the variance is the fit's own: it cannot see a class whose verdicts are wrong (experiments.dynamics.worth)
            error += ", if the assumption holds"
        target = f"{self.target_error:g}" if self.target_error is not None else "the target"
        if self.label_order == "random":
            count = "random past its first part, so how many is not counted"
        elif self.label_next_needed == 0:
            count = f"within {target} already"
        elif self.label_next_needed:
            count = f"about {self.label_next_needed} labels in this order bring it to {target}"
        else:
            count = f"{self.followed} labels in this order would not bring it to {target}"
        first_labels = f"; the first {self.needed} test the fit" if self.needed else ""
        return (
            f"label next (p_factual's standard error over the unlabelled claims {error}; {count}{first_labels}): "
            f"{first([a.claim for a in self.label_next])}"
        )

    def unreached_line(self) -> str | None:
        """Why labels do not settle every class (None: they reach each, or there are too few to decide at all)."""
        if not self.unreached or self.orientation == "assumption":
            return None
        return (
            f"no labelled claim falls in {', '.join(self.unreached)}: which verdicts are right there is the "
            f"assumption's, not the labels' (label claims from {'it' if len(self.unreached) == 1 else 'them'}: "
            f"{first(self.to_label)})"
        )

    def rejection_line(self) -> str | None:
        """Why held-out labels say p_factual is not calibrated (None: they do not reject it)."""
        test = self.held_out
        if test is None or test.p_value >= HELD_OUT_LEVEL:
            return None
        if test.folds:
            scored = "by corrections fitted on the other folds"
        elif test.fit_folds:
            scored = f"by a fit that did not see them ({test.fit_folds} folds)"
        else:
            scored = "by the fit, which did not see them"
        return (
            f"the {test.labelled} labelled claims reject the fitted p_factual, each scored {scored} "
            f"(Spiegelhalter Z = {test.z:.2f}, p = {test.p_value:.3g}, at {HELD_OUT_LEVEL:g})"
        )

    def share_width(self) -> float | None:
        """The width of the share's interval (None: stated, or not recorded)."""
        if self.base_rate is not None or self.share_interval is None:
            return None
        return self.share_interval[1] - self.share_interval[0]

    def base_rate_line(self) -> str | None:
        """Why p_factual is not calibrated for its base rate, and what would settle it (None: it is)."""
        width = self.share_width()
        if width is None or width <= MAX_SHARE_WIDTH or self.share_interval is None:
            return None
        low, high = self.share_interval
        line = (
            f"the turns do not pin the share of factual claims: 95% interval [{low:.3f}, {high:.3f}], wider than "
            f"{MAX_SHARE_WIDTH:g}; state it (`debate dynamics fit --base-rate P`: about "
            f"{labels_for_share(MAX_SHARE_WIDTH)} randomly chosen labelled claims measure it to "
            f"+-{MAX_SHARE_WIDTH / 2:g})"
        )
        if self.share_standard_error:
            claims = math.ceil((2 * 1.96 * self.share_standard_error / MAX_SHARE_WIDTH) ** 2 * self.claims)
            line += f" or fit on about {claims:,} claims"
        return line

    def em_line(self) -> str | None:
        """Why the fit is not its maximum (None: EM converged)."""
        return None if self.em_converged else em_stopped_line(self.em_steps)

    def share_said(self, share: float) -> str:
        """The share of factual claims the fit starts from, with what stands behind it."""
        if self.base_rate is not None:
            return f"share factual {self.base_rate:g} as stated"
        if self.share_interval is not None:
            return f"share factual {share:.3f}, 95% [{self.share_interval[0]:.3f}, {self.share_interval[1]:.3f}]"
        return f"share factual {share:.3f}"

    def assumption(self, classes: int, share: float | None = None) -> str | None:
        """The line a verdict carries when the fit leans on the assumption (None: labels settle it); `share`: the
        fitted share of factual claims, said with its interval."""
        if self.orientation == "labels":
            return None
        said = f" ({self.share_said(share)})" if share is not None else ""
        return (
            f"fitted without labels on {self.claims - self.labelled} of {self.claims} claims{said}: p_factual assumes "
            "the agents are right more often than wrong"
            + ("" if classes == 1 else " in every class of items")
            + f", which only labels can test (label {self.needed} more claims: {first(self.to_label)})"
        )


def em_stopped_line(steps: int | None) -> str:
    """The line a fit whose EM stopped after `steps` before converging leaves its file: it is not the maximum."""
    return (
        f"EM and the quasi-Newton search after it stopped after {steps} steps before converging: the fit is not the "
        "maximum"
    )


def first(claims: list[str], shown: int = 5) -> str:
    return ", ".join(claims[:shown]) + (", ..." if len(claims) > shown else "")


MAX_SHARE_WIDTH = 0.1
"""The widest 95% interval of the fitted share of factual claims a fit without labels is calibrated with: an
undecided claim's p_factual moves about as much as the share does, so a share known to +-0.05 keeps it within about
0.05 of the truth. Wider, the file is not calibrated for its base rate and says what would settle it."""


def labels_for_share(width: float, share: float = 0.5) -> int:
    """Randomly chosen labelled claims that measure a share to within +-width/2 (95%, binomial)."""
    return math.ceil(share * (1 - share) * (2 * 1.96 / width) ** 2)


MIN_LABELS = 30
"""Labelled claims (at least 5 of each label) before labels, not the assumption, decide: fewer cannot fit the
two-parameter correction. docs/dynamics.md shows what more buy."""
SMOOTHING = 0.5
"""Pseudo-counts on each side of every context's verdicts in p_factual (Jeffreys' prior): a context seen 3 times,
always "true", gives (3 + 0.5) / (3 + 1) = 0.875, not 1, so no thin context makes p_factual exactly 0 or 1."""


class Reliability(BaseModel):
    """How well p_factual is calibrated on labelled claims."""

    model_config = ConfigDict(frozen=True)
    claims: int
    ece: float
    """Expected calibration error over 10 equal-width bins: sum over bins of (bin share) x |mean p - factual share|."""
    brier: float
    """Mean (p_factual - label)^2."""
    bins: list[tuple[float, float, int]]
    """Per non-empty bin: (mean p_factual, share factual, claims)."""


def reliability(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> Reliability:
    """ECE (10 equal-width bins), Brier score and the reliability table of (p_factual, true label) pairs.

    Raises:
        UsageError: no pair at all.
    """
    if not pairs:
        raise UsageError("no claim has a p_factual: was the run given --debate.calibration?")
    grouped: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    # bin k holds k/bins <= p < (k+1)/bins, the last one 1.0 too: compared with the edges themselves, since
    # int(p * bins) puts 0.8999999999999999 (below 0.9) in the last bin by rounding
    edges = [k / bins for k in range(1, bins)]
    for p, label in pairs:
        grouped[bisect.bisect_right(edges, p)].append((p, label))
    table = [(sum(p for p, _ in g) / len(g), sum(label for _, label in g) / len(g), len(g)) for g in grouped if g]
    n = len(pairs)
    return Reliability(
        claims=n,
        ece=sum(k / n * abs(mean_p - share) for mean_p, share, k in table),
        brier=sum((p - label) ** 2 for p, label in pairs) / n,
        bins=table,
    )


class FittedOn(_Model):
    """What the calibration was fitted on: a run that differs in model, prompts or chain cannot use it."""

    model: str
    """The model name the fitted run sent."""
    roles: dict[str, str] = Field(default_factory=dict)
    """Each role whose turns ran on a model of its own in the fitted run, and that model; every other role ran on
    `model`."""
    team: dict[str, ModelIdentity] = Field(default_factory=dict)
    """Each role of the fitted run and its model's identity (name and sampling settings), as its reports recorded
    them: a run whose role runs at another setting is another team (empty in files made before it was kept: then
    the names alone are compared)."""
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
    claims_per_input: dict[str, int] = Field(default_factory=dict)
    """The debated claims each input added (run folder, log, export or store), in the order given: a claim is its
    input and its id, and the same debate given twice counts for the input it came first in (empty in files made
    before it was kept)."""
