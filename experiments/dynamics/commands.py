"""The `debate dynamics fit|predict|validate` commands' work, imported when one of them runs (the command line
itself, experiments.dynamics.cli, registers them without numpy or scipy)."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from debate.calibration import CALIBRATION_FORMAT, Calibration
from debate.cli.conventions import err, output_folder
from debate.engine import TurnContext, chain_digest, load_chain
from debate.errors import UsageError
from experiments.dynamics.calibrate import calibration_of, plot_reliability, reliability
from experiments.dynamics.compose import compose_team, composed_table
from experiments.dynamics.fitted import FittedModel
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.identity import distinct_claims
from experiments.dynamics.observe import RunObservations
from experiments.dynamics.predict import Predicted, SelfCheck, Setting, governor_of, predict, self_check
from experiments.dynamics.rates import fit
from experiments.dynamics.readers import read_run, read_store, stop_calibration
from experiments.dynamics.replicate import design_of
from experiments.dynamics.report import Checked, fit_table, predict_table, validate_table

__all__ = ["fit_command", "plot_predictions", "predict_command", "validate_command"]


def _labelled(run: RunObservations) -> bool:
    return all(label is not None for label, _, _ in run.finals.values())


def _share(run: RunObservations, fitted: FittedModel) -> float:
    """The run's share of factual claims; the fit's estimate where some are not labelled."""
    if not _labelled(run):
        return fitted.prior
    return sum(bool(label) for label, _, _ in run.finals.values()) / len(run.finals)


def _observed(run: RunObservations) -> tuple[float, float]:
    """Accuracy and calls per claim of a fully labelled run."""
    finals = list(run.finals.values())
    return sum(label == v for label, v, _ in finals) / len(finals), sum(c for *_, c in finals) / len(finals)


def _model(run: RunObservations, args: argparse.Namespace, others: list[RunObservations]) -> FittedModel:
    """The fit of `run`, its checks across `others` too when they share its items."""
    shared = [run.observations] + [o.observations for o in others] if others else []
    return fit_model(
        run.observations,
        model=args.model,
        bootstrap=args.bootstrap,
        seed=args.seed,
        runs=shared,
        designs=[design_of(run)],
    )


def _self_check(run: RunObservations, fitted: FittedModel) -> SelfCheck | None:
    """The run's own setting predicted from the fit against what it observed (None: not every claim labelled, so
    its accuracy is not known)."""
    if not _labelled(run):
        return None
    setting = Setting(run.chain, run.min_rounds, run.max_rounds)
    [own] = predict(run.observations, [setting], share_true=_share(run, fitted), fitted=fitted)
    return self_check(own, *_observed(run))


_MIN_BOOTSTRAP = 10
"""Fewer replicates than this give a 95% interval in name only (1 replicate: zero width)."""


def _check_bootstrap(args: argparse.Namespace) -> None:
    if args.bootstrap < _MIN_BOOTSTRAP:
        raise UsageError(
            f"--bootstrap {args.bootstrap}: at least {_MIN_BOOTSTRAP} replicates are needed for the 95% intervals"
        )


def _check_given(paths: list[Path], urls: list[str]) -> None:
    """The same input twice by name, refused before anything is read (the same debates under two names are found
    by their content and counted once: observe.distinct_claims)."""
    for i, path in enumerate(paths):
        for other in paths[:i]:
            if path.resolve() == other.resolve():
                raise UsageError(f"{path} is given twice: each input is fitted once")
    for i, url in enumerate(urls):
        if url in urls[:i]:
            raise UsageError(f"--db {url} is given twice: each store is fitted once")


def _check_save(save: Path | None, inputs: list[Path]) -> None:
    """A --save path that would lose an input or fail after the fit, refused before the fit."""
    if save is None:
        return
    if save.is_dir():
        raise UsageError(
            f"--save {save}: a folder; give the calibration file's path (e.g. {save / 'calibration.json'})"
        )
    if not save.parent.is_dir():
        raise UsageError(f"--save {save}: the folder {save.parent} does not exist")
    target = save.resolve()
    for given in inputs:
        read = [given] if given.is_file() else [given / "results.jsonl", given / "config.json"]
        if any(target == path.resolve() for path in read):
            raise UsageError(f"--save {save} would overwrite the input {given}: save the calibration elsewhere")
    if save.is_file():
        with save.open("rb") as head:
            start = head.read(4096)
        if CALIBRATION_FORMAT.encode() not in start:
            raise UsageError(f"--save {save}: the file exists and is not a calibration file; it is left as it is")


def _settings(run: RunObservations) -> dict[str, object]:
    return {
        "model": run.model,
        "chain": chain_digest(load_chain(run.debate.chain)),
        "min rounds": run.min_rounds,
        "max rounds": run.max_rounds,
        "team": run.team,
    }


def _check_alike(runs: list[RunObservations], *, models: bool = True) -> None:
    """Inputs of another model (with `models`), chain, round limits, team or prompts, refused before the fit: their
    turns are not one behaviour (naming the two inputs and what differs)."""
    first = runs[0]
    mine = _settings(first) | ({} if models else {"model": None})
    for other in runs[1:]:
        theirs = _settings(other) | ({} if models else {"model": None})
        differ = [f"{k} {mine[k]!r} against {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]
        prompts = sorted(k for k in set(first.prompts) & set(other.prompts) if first.prompts[k] != other.prompts[k])
        if prompts:
            differ.append(f"prompts {', '.join(prompts)} (sha256)")
        if differ:
            shown = "; ".join(d.replace("chain '", "chain digest '") for d in differ)
            raise UsageError(
                f"{first.run_dir} and {other.run_dir} were debated under other settings ({shown}): fit one setting "
                "at a time"
            )


def _check_base_rate(base_rate: float | None, runs: list[RunObservations]) -> None:
    if base_rate is not None and all(_labelled(run) for run in runs):
        raise UsageError(
            "--base-rate is for a fit with unlabelled claims; every claim given is labelled, and their share is the "
            "base rate"
        )


def fit_command(args: argparse.Namespace) -> int:
    _check_bootstrap(args)
    if not args.runs and not args.db:
        raise UsageError("give a run folder, a results log or an export to fit, or --db URL for the desk's store")
    _check_given(args.runs, args.db)
    _check_save(args.save, args.runs)
    runs = [read_run(r) for r in args.runs] + [read_store(url) for url in args.db]
    _check_alike(runs, models=args.team is None)
    runs, per_input = _distinct(runs, shared_ids=args.team is not None)
    _check_base_rate(args.base_rate, runs)
    if args.team is not None:
        composed = compose_team(args, runs)
        sys.stdout.write(composed.model_dump_json(indent=2) + "\n" if args.json else composed_table(composed))
        return _save(composed, args.save)
    seen = [o for run in runs for o in run.observations]
    first = runs[0]
    per_run = [run.observations for run in runs]
    fitted = fit_model(
        seen,
        model=args.model,
        bootstrap=args.bootstrap,
        seed=args.seed,
        runs=per_run,
        designs=[design_of(run) for run in runs],
        base_rate=args.base_rate,
        family=args.family,
        label_order=args.label_order,
    )
    result = fit(
        seen,
        runs=[str(r.run_dir) for r in runs],
        chain=first.chain,
        min_rounds=first.min_rounds,
        max_rounds=first.max_rounds,
        bootstrap=args.bootstrap,
        seed=args.seed,
        fitted=fitted,
        self_checks=[c for c in (_self_check(run, fitted) for run in runs) if c is not None],
    )
    sys.stdout.write(result.model_dump_json(indent=2) + "\n" if args.json else fit_table(result))
    return _save(calibration_of(fitted, runs, per_input=per_input), args.save) if args.save is not None else 0


def _distinct(runs: list[RunObservations], *, shared_ids: bool) -> tuple[list[RunObservations], dict[str, int]]:
    """Each claim of the inputs once (identity.distinct_claims), what was merged or renamed said on stderr."""
    kept, per_input, notes = distinct_claims(runs, shared_ids=shared_ids)
    for note in notes:
        err.print(note, markup=False, highlight=False, soft_wrap=True)
    return kept, per_input


def _save(calibration: Calibration, save: Path | None) -> int:
    if save is None:
        err.print(calibration.describe())
        return 0
    tmp = save.with_name(save.name + ".tmp")
    tmp.write_text(calibration.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(save)  # a reader never sees half a calibration
    err.print(f"wrote {save}" + (f" ({calibration.warning()})" if calibration.warning() else ""))
    return 0


def _folder(run: Path) -> Path:
    """Where a run's figures go: its folder, or beside a results log."""
    return run.parent / f"{run.stem}-dynamics" if run.is_file() else run


def plot_predictions(rows: list[Predicted], observed: tuple[str, float, float] | None, folder: Path) -> list[Path]:
    """Accuracy against calls per claim for every setting, with intervals, and the observed point; PNG and SVG."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for i, (chain, stop) in enumerate(dict.fromkeys((r.chain, r.stop != "consensus") for r in rows)):
        mine = sorted(
            (r for r in rows if (r.chain, r.stop != "consensus") == (chain, stop)), key=lambda r: r.calls_per_claim
        )
        xs, ys = [r.calls_per_claim for r in mine], [r.accuracy for r in mine]
        ax.errorbar(
            xs,
            ys,
            yerr=[
                [y - r.accuracy_interval[0] for y, r in zip(ys, mine, strict=True)],
                [r.accuracy_interval[1] - y for y, r in zip(ys, mine, strict=True)],
            ],
            xerr=[
                [x - r.calls_interval[0] for x, r in zip(xs, mine, strict=True)],
                [r.calls_interval[1] - x for x, r in zip(xs, mine, strict=True)],
            ],
            marker="s" if stop else "o",
            linestyle="--" if stop else "-",
            capsize=3,
            color=f"C{i}",
            label=f"{chain}, posterior stop (predicted)" if stop else f"{chain} (predicted)",
        )
        for x, y, r in zip(xs, ys, mine, strict=True):
            text = f"P {r.stop.partition(':')[2]}" if stop else f"min {r.min_rounds}"
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if observed is not None:
        ax.plot(
            [observed[2]],
            [observed[1]],
            marker="*",
            markersize=14,
            color="black",
            linestyle="none",
            label=f"observed ({observed[0]})",
        )
    ax.set_xlabel("model calls per claim")
    ax.set_ylabel("accuracy")
    ax.set_title("Predicted accuracy against cost, from one run's fitted dynamics")
    ax.legend(fontsize=7)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"predicted.{suffix}" for suffix in ("png", "svg")]
    for path in paths:
        fig.savefig(path, dpi=120)
    return paths


def predict_command(args: argparse.Namespace) -> int:
    _check_bootstrap(args)
    run = read_run(args.run)
    chains = args.chain or [run.chain]
    settings = [
        Setting(chain, m, args.max_rounds if args.max_rounds is not None else max(run.max_rounds, m))
        for chain in chains
        for m in (args.min_rounds or [run.min_rounds])
    ]
    most = args.max_rounds if args.max_rounds is not None else run.max_rounds
    settings += [Setting(chain, run.min_rounds, most, stop=p) for chain in chains for p in args.stop]
    fitted = _model(run, args, [])
    rows = predict(run.observations, settings, share_true=_share(run, fitted), fitted=fitted)
    diagnostics, check = fitted.diagnostics, _self_check(run, fitted)
    if args.json:
        body = {
            "diagnostics": diagnostics.model_dump(mode="json"),
            "self_check": check.model_dump(mode="json") if check is not None else None,
            "predictions": [r.model_dump(mode="json") for r in rows],
        }
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    else:
        sys.stdout.write(predict_table(rows, diagnostics, check))
    observed = (f"{run.chain}, min {run.min_rounds}", check.observed_accuracy, check.observed_calls) if check else None
    for path in plot_predictions(rows, observed, output_folder(args.out or _folder(args.run) / "dynamics", "--out")):
        err.print(f"wrote {path}")
    return 0


def agrees(predicted: float, interval: tuple[float, float], observed: float, observed_se: float) -> bool:
    """Whether predicted and observed differ by less than their combined 95% margin: the prediction's bootstrap
    interval and the observed run's own sampling error (a run of n claims is a sample too)."""
    predicted_se = (interval[1] - interval[0]) / 3.92
    return abs(predicted - observed) <= 1.96 * math.sqrt(predicted_se**2 + observed_se**2) + 1e-9 * max(1, observed)


def _setting_of(run: RunObservations) -> Setting:
    """A run's own setting; under the posterior stop, decided by the calibration it ran with."""
    threshold, governor = run.debate.threshold, stop_calibration(run)
    if threshold is None or governor is None:
        return Setting(run.chain, run.min_rounds, run.max_rounds)
    return Setting(run.chain, run.min_rounds, run.max_rounds, stop=threshold, governor=governor)


def _probabilities(fitted: FittedModel, run: RunObservations) -> tuple[list[tuple[float, bool]], str]:
    """(p_factual, label) per finished, labelled debate: the run's own when it recorded them, else the fit's on its
    turns."""
    if run.p_factual:
        labels = {k: run.finals[k][0] for k in run.p_factual if k in run.finals}
        pairs = [(p, labels[k]) for k, p in run.p_factual.items() if labels.get(k) is not None]
        return [(p, bool(label)) for p, label in pairs], "recorded by the run"
    governor, turns = governor_of(fitted), defaultdict(list)
    for o in run.observations:
        turns[o.item].append(TurnContext(o.role, o.state, o.shown, o.verdict))
    scored = [(governor.p_factual(turns[k]), label) for k, (label, _, _) in run.finals.items() if label is not None]
    return [(p, bool(label)) for p, label in scored if p is not None], "the fit applied to its turns"


def _checked(fitted: FittedModel, run: RunObservations, other_dir: Path, other: RunObservations) -> Checked:
    if not _labelled(other):
        raise UsageError(f"{other_dir}: validate compares accuracy, which needs every claim of the run labelled")
    setting = _setting_of(other)
    [p] = predict(run.observations, [setting], share_true=_share(other, fitted), fitted=fitted)
    pairs, source = _probabilities(fitted, other)
    rel = reliability(pairs) if pairs else None
    diagram = plot_reliability(rel, other_dir / "dynamics", f"p_factual on {other_dir.name} ({source})") if rel else []
    accuracy, calls = _observed(other)
    n = len(other.finals)
    spread = statistics.pstdev([c for *_, c in other.finals.values()])
    return Checked(
        run=str(other_dir),
        chain=other.chain,
        min_rounds=other.min_rounds,
        max_rounds=other.max_rounds,
        claims=n,
        predicted_accuracy=p.accuracy,
        accuracy_interval=p.accuracy_interval,
        observed_accuracy=accuracy,
        within_accuracy=agrees(p.accuracy, p.accuracy_interval, accuracy, math.sqrt(accuracy * (1 - accuracy) / n)),
        predicted_calls=p.calls_per_claim,
        calls_interval=p.calls_interval,
        observed_calls=calls,
        within_calls=agrees(p.calls_per_claim, p.calls_interval, calls, spread / math.sqrt(n)),
        backoff_range=p.backoff_range,
        stop=p.stop,
        reliability=rel,
        p_source=source if rel else None,
        diagram=[str(d) for d in diagram],
    )


def validate_command(args: argparse.Namespace) -> int:
    _check_bootstrap(args)
    run = read_run(args.run)
    others = [read_run(o) for o in args.others]
    fitted = _model(run, args, others)
    rows = [_checked(fitted, run, d, o) for d, o in zip(args.others, others, strict=True)]
    diagnostics, check = fitted.diagnostics, _self_check(run, fitted)
    if args.json:
        body = {
            "diagnostics": diagnostics.model_dump(mode="json"),
            "self_check": check.model_dump(mode="json") if check is not None else None,
            "rows": [r.model_dump(mode="json") for r in rows],
        }
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    else:
        sys.stdout.write(validate_table(rows, diagnostics, check))
    return 0
