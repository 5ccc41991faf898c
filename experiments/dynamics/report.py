"""What `debate dynamics` prints: the checks and the model above every table, the warnings they raise, and the
tables themselves (markdown)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from experiments.dynamics.calibrate import Reliability
from experiments.dynamics.fitted import Diagnostics
from experiments.dynamics.predict import Predicted, SelfCheck
from experiments.dynamics.rates import DynamicsFit

__all__ = ["Checked", "diagnostics_lines", "fit_table", "predict_table", "self_check_line", "validate_table"]

CAPPED = 0.2
"""Above this share of debates stopped by the max-rounds cap, a point shows the cap more than the agents."""

_ASSUMES = {
    "markov": "a turn depends only on the opinions it is shown",
    "heterogeneity": "items alike: a later turn does not depend on the initial verdict it was not shown",
    "state": "a role shown the same verdicts behaves the same in every state",
    "overdispersion": "items alike: the same items' initial verdicts vary across runs as one rate per label allows",
}


def _fmt(x: float | None, ci: tuple[float, float] | None = None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def diagnostics_lines(d: Diagnostics) -> list[str]:
    """The model used and why, each check and what it found, and a WARNING line per failed assumption."""
    lines = [f"model: {d.model.describe()}", "", "checks:"]
    for c in d.checks:
        verdict = "not applicable" if c.p_value is None else ("FAILS" if c.rejected else "holds")
        found = c.detail.removeprefix("not applicable: ")
        lines.append(f"- {c.name} ({_ASSUMES[c.name]}; fails at p < {c.level:g}): {verdict}: {found}")
    lines += [""] + [f"WARNING: {w}" for w in d.warnings] + ([""] if d.warnings else [])
    return lines


def self_check_line(check: SelfCheck) -> str:
    """The self-consistency verdict in a line (a WARNING when the run's own figures fall outside it)."""
    p = check.predicted
    said = (
        f"self-consistency: the fitted setting ({p.chain}, min {p.min_rounds}) predicted from its own fit: "
        f"accuracy {_fmt(p.accuracy, p.accuracy_interval)}, observed {check.observed_accuracy:.3f}; calls "
        f"{_fmt(p.calls_per_claim, p.calls_interval)}, observed {check.observed_calls:.2f}"
    )
    if check.holds_accuracy and check.holds_calls:
        return said + ": holds"
    misses = " and ".join(n for n, ok in (("accuracy", check.holds_accuracy), ("calls", check.holds_calls)) if not ok)
    return (
        f"WARNING: {said}: the observed {misses} lie outside the prediction's interval, so the model does not "
        "reproduce the run it was fitted to and its predictions for other settings are not reliable"
    )


def _share_line(result: DynamicsFit) -> str:
    """The share of factual claims the fit starts each posterior from, and where it comes from."""
    labels = result.diagnostics.model.labels
    if labels is None:
        return f"share of factual claims {result.factual_share:.3f} (the labels')"
    if labels.base_rate is not None:
        told = f"share of factual claims {labels.base_rate:g}, as stated (--base-rate)"
    elif labels.share_interval is not None:
        low, high = labels.share_interval
        told = (
            f"share of factual claims {result.factual_share:.3f} [{low:.3f}, {high:.3f}] (95% profile-likelihood "
            "interval: what the turns tell of it)"
        )
    else:
        told = f"share of factual claims {result.factual_share:.3f}"
    ended = "converged" if labels.em_converged else "did NOT converge (stopped at its cap)"
    return f"{told}; EM {ended} in {labels.em_steps} steps"


LISTED = 10
"""Rows of the label-next order the fit's table shows (the saved file and --json keep them all)."""


def _label_next_lines(result: DynamicsFit) -> list[str]:
    """The labels worth asking for: how many, and the first `LISTED` with their reasons."""
    labels = result.diagnostics.model.labels
    line = labels.label_next_line() if labels is not None else None
    if labels is None or line is None:
        return []
    rows = [
        f"| {a.claim} | {'-' if a.p_factual is None else f'{a.p_factual:.3f}'} | {a.reason} |"
        for a in labels.label_next[:LISTED]
    ]
    more = len(labels.label_next) - LISTED
    tail = [f"({more} more in the saved file's labels.label_next)"] if more > 0 else []
    return [line, "", "| claim | p_factual | why |", "|---|---|---|", *rows, *tail, ""] if rows else [line, ""]


def fit_table(result: DynamicsFit) -> str:
    """The fit as markdown, under its checks."""
    lines = [
        f"# Dynamics of {', '.join(result.runs)}",
        "",
        f"chain {result.chain}, min rounds {result.min_rounds}, max rounds {result.max_rounds}; "
        f"{result.claims} debated claims, {result.turns} turns, {result.calls_per_turn:.2f} calls per turn",
        _share_line(result),
        "",
        *diagnostics_lines(result.diagnostics),
        *[self_check_line(check) for check in result.self_checks],
        *([""] if result.self_checks else []),
        *_label_next_lines(result),
        "| role | state | label | shown | n | P(verdict true) [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    for c in result.contexts:
        shown = ",".join("T" if s else "F" for s in c.shown) or "-"
        label = "factual" if c.label else "hallucinated"
        lines.append(f"| {c.role} | {c.state} | {label} | {shown} | {c.n} | {_fmt(c.p_true, (c.low, c.high))} |")
    lines += [
        "",
        "| role | label | turns | flip rate | conformity (to a wrong opinion) | excess agreement within classes |",
        "|---|---|---|---|---|---|",
    ]
    for r in result.roles:
        label = "factual" if r.label else "hallucinated"
        conformity, excess = _fmt(r.conformity, r.conformity_interval), _fmt(r.excess, r.excess_interval)
        lines.append(f"| {r.role} | {label} | {r.turns} | {_fmt(r.flip, r.flip_interval)} | {conformity} | {excess} |")
    classes = result.diagnostics.model.classes
    within = f"within each of the model's {classes} item classes" if classes > 1 else "over all items (one class)"
    lines += [
        "",
        "Conformity counts agreement that comes from shared difficulty too (on an easy item every role is "
        "right, on a hard one every role is wrong, and they agree without looking at each other). The excess "
        f"agreement, P(wrong | shown a wrong opinion) - P(wrong | shown a right one) {within}, is the part "
        "shared difficulty does not explain; it is 0 for a role that ignores what it is shown.",
        "",
    ]
    return "\n".join(lines)


def _setting(r: Predicted) -> str:
    return f"min {r.min_rounds}" if r.stop == "consensus" else r.stop


def predict_table(rows: list[Predicted], diagnostics: Diagnostics, check: SelfCheck | None) -> str:
    """Predictions as markdown, under the checks, the self-consistency line, and the notes on caps and back-offs."""
    lines = [*diagnostics_lines(diagnostics)]
    if check is not None:
        lines += [self_check_line(check), ""]
    lines += [
        "| chain | stop | min | max | accuracy [95% CI] | F1 [95% CI] | calls per claim [95% CI] | stopped by the "
        "cap | back-off range |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        backoff = f"[{r.backoff_range[0]:.3f}, {r.backoff_range[1]:.3f}]" if r.backoff_range else "-"
        minimum = "-" if r.stop != "consensus" else str(r.min_rounds)
        lines.append(
            f"| {r.chain} | {r.stop} | {minimum} | {r.max_rounds} | {_fmt(r.accuracy, r.accuracy_interval)} | "
            f"{_fmt(r.f1, r.f1_interval)} | {_fmt(r.calls_per_claim, r.calls_interval)} | "
            f"{r.capped:.0%} | {backoff} |"
        )
    capped = [r for r in rows if r.capped >= CAPPED]
    if capped:
        listed = ", ".join(f"{r.chain} {_setting(r)} ({r.capped:.0%})" for r in capped)
        lines += [
            "",
            f"the max-rounds cap stops at least {CAPPED:.0%} of debates in: {listed}; there the figures, "
            "and the shape of the min-rounds curve, come from the cap (max rounds) rather than from the agents "
            "agreeing",
        ]
    backed = sorted({b for r in rows for b in r.backed_off})
    if backed:
        lines += [
            "",
            "contexts the fitted run never showed, answered by back-off (the same role, label and shown "
            "verdicts in any state): " + "; ".join(backed),
            "back-off range: the accuracy with each of them "
            "at the end of its interval that lowers it, and at the end that raises it; it assumes the role "
            "behaves alike across states",
        ]
    return "\n".join(lines) + "\n"


class Checked(BaseModel):
    """One other run: predicted against observed, accuracy and calls each with its own margin."""

    model_config = ConfigDict(frozen=True)
    run: str
    chain: str
    min_rounds: int
    max_rounds: int
    claims: int
    predicted_accuracy: float
    accuracy_interval: tuple[float, float]
    observed_accuracy: float
    within_accuracy: bool
    """The difference is inside the combined 95% margin of the prediction and the run's own sampling error."""
    predicted_calls: float
    calls_interval: tuple[float, float]
    observed_calls: float
    within_calls: bool
    backoff_range: tuple[float, float] | None
    """Set when the prediction leans on back-offs: the accuracy over their intervals."""
    stop: str = "consensus"
    """The run's stop rule: consensus (the paper's) or posterior:P (predicted with the run's own calibration)."""
    reliability: Reliability | None = None
    """ECE and Brier score of p_factual on the run (None: no claim has one)."""
    p_source: str | None = None
    """Where p_factual came from: the run's own (recorded), or the fit applied to its turns."""
    diagram: list[str] = Field(default_factory=list)
    """The reliability diagram's files."""


def reliability_line(rel: Reliability, source: str, diagram: list[str]) -> str:
    """ECE and Brier of p_factual in a line, with where the probabilities and the diagram are."""
    drawn = f"; reliability diagram {', '.join(diagram)}" if diagram else ""
    return (
        f"p_factual ({source}) on {rel.claims} labelled claims: expected calibration error {rel.ece:.3f} "
        f"(10 bins), Brier score {rel.brier:.3f}{drawn}"
    )


_NOT_SELF_CHECKED = "self-consistency: not checked (the fitted run's claims are not all labelled)"


def validate_table(rows: list[Checked], diagnostics: Diagnostics, check: SelfCheck | None) -> str:
    """Predicted against observed per run, accuracy and calls each with its own verdict."""
    lines = [
        *diagnostics_lines(diagnostics),
        self_check_line(check) if check is not None else _NOT_SELF_CHECKED,
        "",
        "| run | chain | stop | accuracy: predicted [95% CI] / observed | accuracy within | calls: predicted "
        "[95% CI] / observed | calls within | back-off range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        backoff = f"[{r.backoff_range[0]:.3f}, {r.backoff_range[1]:.3f}]" if r.backoff_range else "-"
        setting = f"min {r.min_rounds}" if r.stop == "consensus" else r.stop
        lines.append(
            f"| {Path(r.run).name} | {r.chain} | {setting} | "
            f"{_fmt(r.predicted_accuracy, r.accuracy_interval)} / {r.observed_accuracy:.3f} | "
            f"{'yes' if r.within_accuracy else 'NO'} | {_fmt(r.predicted_calls, r.calls_interval)} / "
            f"{r.observed_calls:.2f} | {'yes' if r.within_calls else 'NO'} | {backoff} |"
        )
    reliable = [r for r in rows if r.reliability is not None and r.p_source is not None]
    if reliable:
        lines.append("")
        for r in reliable:
            assert r.reliability is not None and r.p_source is not None
            lines.append(f"{Path(r.run).name}: " + reliability_line(r.reliability, r.p_source, r.diagram))
    if any(r.backoff_range for r in rows):
        lines += [
            "",
            "back-off range: the row's prediction leans on contexts the fitted run never showed (see "
            "`debate dynamics predict`); it assumes each role behaves alike across states",
        ]
    return "\n".join(lines) + "\n"
