"""`debate dynamics fit --save FILE`: the fitted model as a calibration file (debate.calibration), and what a
labelled run's p_factual is worth: expected calibration error, Brier score and the reliability diagram."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debate.calibration import (
    Calibration,
    CalibrationClass,
    ContextCount,
    FittedOn,
    Reliability,
    em_stopped_line,
    not_calibrated,
    reliability,
)
from debate.engine import MarkovChain, chain_digest, load_chain
from debate.errors import UsageError
from debate.plugins import TEAMS
from experiments.dynamics.fitted import FittedModel, pulled_parts
from experiments.dynamics.observe import RunObservations

__all__ = ["Reliability", "calibration_of", "plot_reliability", "reliability"]


def _team_prompts(run: RunObservations) -> dict[str, str]:
    """The fitted run's hashes of the prompts its debate team speaks with (prefilters' prompts left out)."""
    chain = load_chain(run.debate.chain)
    team, prompt_set = run.team
    names = TEAMS.get(team)(prompts_dir=prompt_set).prompt_hashes(chain)
    missing = sorted(set(names) - set(run.prompts))
    if missing:
        raise UsageError(f"{run.run_dir}: its reports record no hash for prompt(s) {', '.join(missing)}")
    return {name: run.prompts[name] for name in names}


def calibration_of(
    fitted: FittedModel,
    runs: Sequence[RunObservations],
    *,
    one_team: bool = True,
    per_input: dict[str, int] | None = None,
) -> Calibration:
    """The calibration file of `fitted` (fitted on `runs`, which must share prompts and chain, and with `one_team`
    their models: off for one model's part of a composed team, fitted on its turns in teams of any composition).
    `per_input`: the claims each input added (observe.distinct_claims), by default each run's own."""
    first = runs[0]
    prompts, chain = _one_setting(runs, one_team)
    ix, point = fitted.indexed, fitted.point
    share = fitted.prior
    if not 0 < share < 1:
        only = "factual" if share >= 1 else "hallucinated"
        raise UsageError(
            f"every fitted claim is {only}: a calibration needs claims of both labels (label some of the other, "
            "or leave some unlabelled)"
        )
    classes = [
        CalibrationClass(
            counts=[
                ContextCount(role=role, state=state, label=label, shown=list(shown), true=t, n=n)
                for (role, state, label, shown), t, n in fitted.class_counts(c)
            ],
            **_family(fitted, c),
        )
        for c in range(point.classes)
    ]
    checks = list(fitted.diagnostics.checks)
    return Calibration(
        fitted_on=FittedOn(
            model=first.model,
            roles=dict(first.roles),
            team=dict(first.identities),
            prompts=prompts,
            chain=chain.name,
            chain_sha256=chain_digest(chain),
            min_rounds=first.min_rounds,
            max_rounds=first.max_rounds,
            claims=fitted.claims,
            turns=round(float(ix.turn_weights().sum())),  # a pseudo-item's turns by its weight: each turn once
            factual_share=share,
            runs=[str(r.run_dir) for r in runs],
            claims_per_input=per_input
            if per_input is not None
            else {str(r.run_dir): len({o.item for o in r.observations}) for r in runs},
        ),
        classes=classes,
        shares={"factual": list(point.shares[True]), "hallucinated": list(point.shares[False])},
        model_reason=fitted.choice.reason,
        calls_per_turn=fitted.calls_per_turn,
        checks=checks,
        not_calibrated=[*not_calibrated(checks, point.classes, fitted.choice.labels), *_stopped_short(fitted)],
        labels=fitted.choice.labels,
    )


def _stopped_short(fitted: FittedModel) -> list[str]:
    """A labelled fit whose EM stopped before converging, as a line: it has no `labels` block to carry EM's line
    (Labels.em_line, an unlabelled fit's), and its file is not the fit's maximum either."""
    point = fitted.point
    return [] if fitted.choice.labels is not None or point.converged else [em_stopped_line(point.steps)]


def _one_setting(runs: Sequence[RunObservations], one_team: bool) -> tuple[dict[str, str], MarkovChain]:
    """The prompts and chain every run shares (refused otherwise: one calibration each)."""
    first = runs[0]
    prompts = _team_prompts(first)
    chain = load_chain(first.debate.chain)
    for other in runs[1:]:
        team = (other.model, other.roles, other.identities) if one_team else ()
        if (*team, chain_digest(load_chain(other.debate.chain))) != (
            *((first.model, first.roles, first.identities) if one_team else ()),
            chain_digest(chain),
        ):
            raise UsageError(f"{other.run_dir}: another model or chain than {first.run_dir}; save one calibration each")
        if any(other.prompts.get(k) != v for k, v in prompts.items()):
            raise UsageError(f"{other.run_dir}: other prompts than {first.run_dir}; save one calibration each")
    return prompts, chain


def _family(fitted: FittedModel, c: int) -> dict[str, Any]:
    """Class `c`'s fields of the pulled family (none for the tables)."""
    if fitted.pulled is None:
        return {}
    own, pull = pulled_parts(fitted.pulled, c)
    return {"family": "pulled", "own": own, "pull": pull}


def plot_reliability(rel: Reliability, folder: Path, title: str) -> list[Path]:
    """The reliability diagram (PNG and SVG): factual share against mean p_factual per bin, the diagonal, counts."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    xs, ys = [b[0] for b in rel.bins], [b[1] for b in rel.bins]
    ax.plot(xs, ys, marker="o", color="C0", label=f"observed (ECE {rel.ece:.3f}, Brier {rel.brier:.3f})")
    for x, y, (_, _, k) in zip(xs, ys, rel.bins, strict=True):
        ax.annotate(str(k), (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean p_factual (10 bins)")
    ax.set_ylabel("share of claims factual")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"reliability.{suffix}" for suffix in ("png", "svg")]
    for path in paths:
        fig.savefig(path, dpi=120)
    return paths
