"""`debate dynamics fit LOG... --team SPEC --save FILE`: a calibration for a team of several models, composed from
each model's own fit.

Contexts are keyed by role and model: every turn a model spoke in the inputs (in any role, in a team of any
composition) is that model's, fitted with the other models' verdicts as what it was shown. On labelled claims, a
debate's likelihood factorizes by model when the models' item classes are independent given the label (each turn's
probability depends on its own model's class, and the classes' prior is a product), so each model is fitted alone
and the team's classes are every combination of its models' classes, with the product of their shares. Unlabelled
claims couple the models through their common latent label, so a composition needs labels.

The assumption is tested where it can be: on claims two of the models both debated (a mixed team's run), a G test
of association between the two fits' item classes. One population behind two names fails it (the same blind
spots), and the composed file then says it is not calibrated; untested, every report says what it assumes."""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from debate.calibration import (
    Calibration,
    CalibrationClass,
    Check,
    ComposedPart,
    FittedOn,
    Independence,
    not_calibrated,
)
from debate.cli.conventions import err
from debate.engine import PosteriorModel, load_chain
from debate.errors import UsageError
from debate.types import ModelIdentity, name_of_label
from experiments.dynamics.calibrate import calibration_of
from experiments.dynamics.diagnostics import fitted_checks
from experiments.dynamics.fitted import FittedModel
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.observe import Observation, RunObservations
from experiments.dynamics.replicate import design_of

__all__ = ["compose_team", "composed_table", "parse_team", "spoken_by"]


def parse_team(text: str, roles: Sequence[str]) -> dict[str, str]:
    """`MODEL,ROLE=MODEL,...` as every role's model: a bare name is every role not named (`weak,leader=strong`)."""
    default: str | None = None
    team: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        role, eq, model = entry.partition("=")
        if not eq:
            if default is not None or not entry:
                raise UsageError(f"--team {text!r}: one bare model (every other role's), then ROLE=MODEL entries")
            default = entry
        elif role.strip() not in roles:
            raise UsageError(f"--team: the chain has no role {role.strip()!r} (its roles: {', '.join(roles)})")
        elif not model.strip():
            raise UsageError(f"--team: {role.strip()}= names no model")
        elif role.strip() in team:
            raise UsageError(
                f"--team: {role.strip()} is given twice ({team[role.strip()]} and {model.strip()}): one model a role"
            )
        else:
            team[role.strip()] = model.strip()
    missing = [r for r in roles if r not in team]
    if missing and default is None:
        raise UsageError(f"--team names no model for {', '.join(missing)} (a bare model name covers every other role)")
    return {role: team.get(role, default or "") for role in roles}


def spoken_by(run: RunObservations, role: str) -> str:
    """The model a run's `role` spoke on (the reports' `meta.roles`, else the run's model)."""
    return run.roles.get(role, run.model)


def _seen(runs: Sequence[RunObservations], team: dict[str, str]) -> dict[str, list[list[Observation]]]:
    """Per model of the team, per run, the turns it spoke; refused when a role's model never spoke in that role."""
    for role, model in team.items():
        if not any(spoken_by(run, role) == model and any(o.role == role for o in run.observations) for run in runs):
            had = sorted({spoken_by(run, role) for run in runs})
            raise UsageError(
                f"--team: no input has the {role} on model {model!r} (the inputs have it on {', '.join(had)}): "
                "a role's behaviour is fitted from turns it spoke on that model"
            )
    return {
        model: [[o for o in run.observations if spoken_by(run, o.role) == model] for run in runs]
        for model in dict.fromkeys(team.values())
    }


def _labelled(runs: Sequence[RunObservations]) -> None:
    for run in runs:
        unlabelled = sum(label is None for label, _, _ in run.finals.values())
        if unlabelled:
            raise UsageError(
                f"{run.run_dir}: {unlabelled} claim(s) without a label; --team composes labelled fits (an unknown "
                "label is shared by every model's turns, and the models' fits no longer factor)"
            )


def compose_team(args: argparse.Namespace, runs: list[RunObservations]) -> Calibration:
    """Fit each model of `args.team` on its turns in `runs`, check the composition against every input, and return
    the team's calibration."""
    if args.family == "pulled":
        raise UsageError("--team composes the tables family (a rate per context); leave --family at auto or tables")
    _labelled(runs)
    roles = load_chain(runs[0].debate.chain).spec.all_roles()
    team = parse_team(args.team, roles)
    parts: dict[str, Part] = {}
    for model, per_run in _seen(runs, team).items():
        seen = [o for turns in per_run for o in turns]
        # no designs: a model's turns in a mixed team are not a run of it; the composition is checked below instead
        fitted = fit_model(seen, model=args.model, bootstrap=args.bootstrap, seed=args.seed, runs=per_run)
        spoke = [run for run, turns in zip(runs, per_run, strict=True) if turns]
        parts[model] = Part(fitted, calibration_of(fitted, spoke, one_team=False), spoke)
    checked = [_run_checks(run, roles, parts, args.seed) for run in runs]
    return _composed(team, parts, checked, _independence(parts))


@dataclass(frozen=True)
class Part:
    """One model's part: its fit on the turns it spoke, that fit as a calibration, and the inputs it spoke in."""

    fitted: FittedModel
    calibration: Calibration
    runs: list[RunObservations]


def _classes(
    team: dict[str, str], parts: dict[str, Part]
) -> tuple[list[CalibrationClass], dict[Literal["factual", "hallucinated"], list[float]]]:
    """The team's item classes: every combination of its models' classes, each role's counts from its model's class,
    each combination's share the product of theirs (independent classes)."""
    models = list(dict.fromkeys(team.values()))
    classes: list[CalibrationClass] = []
    shares: dict[Literal["factual", "hallucinated"], list[float]] = {"factual": [], "hallucinated": []}
    for combo in itertools.product(*(range(len(parts[m].calibration.classes)) for m in models)):
        picked = dict(zip(models, combo, strict=True))
        counts = [c for m in models for c in parts[m].calibration.classes[picked[m]].counts if team[c.role] == m]
        classes.append(CalibrationClass(counts=counts))
        for label, each in shares.items():
            share = 1.0
            for m in models:
                share *= parts[m].calibration.shares[label][picked[m]]
            each.append(share)
    return classes, shares


def _run_checks(
    run: RunObservations, roles: Sequence[str], parts: dict[str, Part], seed: int
) -> tuple[list[Check], int]:
    """The markov, heterogeneity and state checks of the composed model of `run`'s own team against `run` (runs of
    that model with the run's design), and that model's classes: each model's memory and state behaviour is tested
    where it spoke."""
    team = {role: spoken_by(run, role) for role in roles}
    outside = sorted(set(team.values()) - set(parts))
    if outside:
        err.print(f"{run.run_dir}: not checked (its team has {', '.join(outside)}, outside --team)", markup=False)
        return [], 0
    classes, shares = _classes(team, parts)
    model = PosteriorModel(
        classes=[k.roles() for k in classes],
        shares={True: shares["factual"], False: shares["hallucinated"]},
        prior=sum(label is True for label, _, _ in run.finals.values()) / len(run.finals),
    )
    described = f"the composed model of {run.run_dir}'s team"
    checks = fitted_checks(run.observations, model, [design_of(run)], described=described, seed=seed)
    return [c.model_copy(update={"detail": f"{run.run_dir}: {c.detail}"}) for c in checks], len(classes)


def _composed(
    team: dict[str, str], parts: dict[str, Part], checked: list[tuple[list[Check], int]], tests: list[Independence]
) -> Calibration:
    models = list(parts)
    calibrations = [parts[m].calibration for m in models]
    classes, shares = _classes(team, parts)
    turns = sum(c.fitted_on.turns for c in calibrations)
    claims = {name for m in models for name in parts[m].fitted.indexed.items}
    # the team's [model]: the model most of its roles speak on (the first role's on a tie)
    main = Counter(team.values()).most_common(1)[0][0]
    first = calibrations[0].fitted_on
    # each run's failed checks, read with the classes of the model that was checked against it
    lines = [line for checks, classes in checked for line in not_calibrated(checks, classes)]
    lines += [
        f"the item classes of {t.models[0]} and {t.models[1]} are associated on the {t.claims} claims they both "
        f"debated (G {t.statistic:.1f}, p {t.p_value:.2g}): they share blind spots, which the composition takes as "
        "independent"
        for t in tests
        if t.rejected
    ]
    return Calibration(
        version=5,
        fitted_on=FittedOn(
            model=main,
            roles={r: m for r, m in team.items() if m != main},
            prompts=first.prompts,
            chain=first.chain,
            chain_sha256=first.chain_sha256,
            min_rounds=first.min_rounds,
            max_rounds=first.max_rounds,
            claims=len(claims),
            turns=turns,
            factual_share=sum(c.fitted_on.factual_share * c.fitted_on.claims for c in calibrations)
            / sum(c.fitted_on.claims for c in calibrations),
            runs=list(dict.fromkeys(r for c in calibrations for r in c.fitted_on.runs)),
            team={r: i for r, m in team.items() if (i := _identity(parts[m].calibration, m)) is not None},
        ),
        classes=classes,
        shares=shares,
        model_reason="composed: " + "; ".join(f"{m}: {parts[m].calibration.model_reason}" for m in models),
        calls_per_turn=sum(c.calls_per_turn * c.fitted_on.turns for c in calibrations) / turns,
        checks=[c for checks, _ in checked for c in checks],
        not_calibrated=lines,
        composed=[_part(m, team, parts[m]) for m in models],
        independence=tests,
    )


def _identity(calibration: Calibration, model: str) -> ModelIdentity | None:
    """The identity (name and sampling settings) `model` spoke with in the runs of its own fit, where they were
    recorded: a run of the composed team at other settings is then another team."""
    name = name_of_label(model)
    return next((i for i in calibration.fitted_on.team.values() if i.name == name), None)


def _part(model: str, team: dict[str, str], part: Part) -> ComposedPart:
    calibration, spoke = part.calibration, part.runs
    return ComposedPart(
        model=model,
        roles=[r for r, m in team.items() if m == model],
        classes=len(calibration.classes),
        claims=calibration.fitted_on.claims,
        turns=calibration.fitted_on.turns,
        factual_share=calibration.fitted_on.factual_share,
        model_reason=calibration.model_reason,
        runs=[str(r.run_dir) for r in spoke],
    )


def _independence(parts: dict[str, Part]) -> list[Independence]:
    """Per pair of models with several classes each and claims both debated: the G test of association between
    their fits' item classes given the label (summed over the two labels: the class shares differ by label, which
    alone would associate them), on the responsibility-weighted tables of those claims."""
    tests = []
    for a, b in itertools.combinations(parts, 2):
        fa, fb = parts[a].fitted, parts[b].fitted
        if fa.point.classes < 2 or fb.point.classes < 2:
            continue  # one class: no blind spots to share
        label = {o.item: o.label for o in fa.indexed.observations}
        where_b = {item: i for i, item in enumerate(fb.indexed.items)}
        both = [(i, where_b[item], label[item]) for i, item in enumerate(fa.indexed.items) if item in where_b]
        if len(both) < 20:
            continue
        g, df = 0.0, 0
        for side in (True, False):
            rows = [(i, j) for i, j, t in both if t is side]
            if not rows:
                continue
            table = fa.point.responsibilities[[i for i, _ in rows]].T @ fb.point.responsibilities[[j for _, j in rows]]
            expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
            g += float(2 * np.sum(table * np.log(np.where(table > 0, table / np.maximum(expected, 1e-300), 1.0))))
            df += (fa.point.classes - 1) * (fb.point.classes - 1)
        p = float(stats.chi2.sf(g, df))
        tests.append(Independence(models=(a, b), claims=len(both), statistic=g, df=df, p_value=p, rejected=p < 0.01))
    return tests


def composed_table(calibration: Calibration) -> str:
    """What `fit --team` prints: each model's part, the checks of the composition against the inputs, and the test
    of its independence assumption."""
    lines = ["| model | roles | claims | turns | classes | why |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {p.model} | {', '.join(p.roles)} | {p.claims} | {p.turns} | {p.classes} | {p.model_reason} |"
        for p in calibration.composed
    ]
    lines += ["", "| check | rejected | p | detail |", "|---|---|---|---|"]
    lines += [
        f"| {c.name} | {'yes' if c.rejected else 'no'} | "
        f"{'-' if c.p_value is None else f'{c.p_value:.3g}'} | {c.detail} |"
        for c in calibration.checks
    ]
    lines += [
        f"| independence of {t.models[0]} and {t.models[1]} | {'yes' if t.rejected else 'no'} | {t.p_value:.3g} | "
        f"G {t.statistic:.1f}, df {t.df}, on the {t.claims} claims both debated |"
        for t in calibration.independence
    ]
    said = calibration.warning()
    return "\n".join([*lines, "", f"p_factual: {said}" if said else "p_factual: calibrated"]) + "\n"
