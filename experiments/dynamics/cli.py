"""`debate dynamics fit | predict | validate | simulate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from debate.cli.conventions import Subcommands, add_command_group, examples, output_folder
from debate.errors import UsageError

__all__ = ["register"]


def _rounds(value: str) -> list[int]:
    low, sep, high = value.partition("..")
    try:
        rounds = list(range(int(low), int(high) + 1)) if sep else [int(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give N or A..B, e.g. 0..3") from None
    if not rounds or min(rounds) < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: rounds must be 0 or more, A <= B")
    return rounds


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give a share between 0 and 1, e.g. 0.7") from None
    if not 0 < share < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: a share strictly between 0 and 1")
    return share


def _stop(value: str) -> float:
    from debate.calibration import parse_stop

    try:
        rule = parse_stop(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if rule == "consensus":
        raise argparse.ArgumentTypeError("give posterior:P (the paper's rule is predicted anyway)")
    return rule


def register(sub: Subcommands) -> None:
    """Add `debate dynamics` and its commands."""
    dyn = add_command_group(
        sub,
        "dynamics",
        extra="experiments",
        dest="dynamics",
        metavar="COMMAND",
        help="fit each role's behaviour from a run's turns; predict other chains exactly",
    )
    f = _add_fit(dyn)
    p = _add_predict(dyn)
    v = dyn.add_parser(
        "validate",
        help="predicted vs observed for runs of other settings on the same items (within: "
        "the difference is inside the combined 95%% margin of the prediction and the observed run)",
        epilog=examples("debate dynamics validate FIT_RUN OTHER_RUN..."),
    )
    v.add_argument("run", type=Path, help="the run to fit")
    v.add_argument("others", nargs="+", type=Path, help="runs of other settings to check the prediction against")
    v.set_defaults(handler=_validate)
    _add_simulate(dyn)
    for parser in (f, p, v):
        parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates over items")
        parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
        parser.add_argument("--json", action="store_true", help="JSON instead of tables (the checks included)")
        parser.add_argument(
            "--model",
            choices=["auto", "one-class", "mixture"],
            default="auto",
            help="auto: a mixture of item classes when a heterogeneity check fails, else the "
            "number of classes BIC prefers (1..3); one-class: every item alike; mixture: 2 or 3 "
            "classes",
        )


def _add_fit(dyn: Any) -> Any:
    f = dyn.add_parser(
        "fit",
        help="each role's P(verdict true | what it was shown), flip, conformity and excess agreement, and the "
        "checks of the model's assumptions",
        epilog=examples(
            "debate dynamics fit results/embedded/*-qa-mcmad-*/",
            "debate dynamics fit --db sqlite:///desk.db --save calibration.json",
            "debate dynamics fit weak.jsonl strong.jsonl --team weak,leader=strong --save team.json",
        ),
    )
    f.add_argument(
        "runs",
        nargs="*",
        type=Path,
        help="experiment run folders (mcmad method), `debate verify --output` logs, or the desk's jsonl exports",
    )
    f.add_argument(
        "--db",
        action="append",
        default=[],
        metavar="URL",
        help="also fit the desk's store at URL (sqlite:///PATH, postgresql://...): its finished audits, each claim "
        "labelled by its latest review (repeatable)",
    )
    f.add_argument(
        "--save",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the fitted model as a calibration file (JSON, docs/schema.md) for --calibration",
    )
    f.add_argument(
        "--base-rate",
        type=_share,
        default=None,
        metavar="P",
        help="the share of factual claims, where you know it (a labelled sample, an audit history): held fixed in the "
        "fit of unlabelled claims instead of estimated from their turns, and recorded as given",
    )
    f.add_argument(
        "--family",
        choices=["auto", "tables", "pulled"],
        default="auto",
        help="how a fit with unlabelled claims ties each class's rates: tables (a rate per context), pulled (each "
        "role's own rate per class and its pull toward the last verdict shown: far fewer parameters), or auto "
        "(BIC chooses); pulled also fits a fully labelled run",
    )
    f.add_argument(
        "--label-order",
        choices=["random", "variance"],
        default="random",
        help="how the labels worth asking for (labels.label_next) go on past a spread while labels are few and the "
        "classes no label reaches: a seeded random sample (the default: measured better than the variance order on "
        "two simulated populations out of two at most counts, docs/dynamics.md), or by the expected fall of "
        "p_factual's variance",
    )
    _add_team(f)
    f.set_defaults(handler=_fit)
    return f


def _add_team(f: Any) -> None:
    f.add_argument(
        "--team",
        default=None,
        metavar="MODEL,ROLE=MODEL",
        help="compose a calibration for a team of several models from labelled inputs of any teams: each model "
        "fitted on the turns it spoke, each role read from its model's fit (`weak,leader=strong`: every role on "
        "weak but the leader); assumes the models' errors independent, tested where two of them debated the same "
        "claims (docs/teams.md)",
    )


def _add_predict(dyn: Any) -> Any:
    p = dyn.add_parser(
        "predict",
        help="accuracy, F1 and calls of other chains and min rounds, computed exactly",
        epilog=examples(
            "debate dynamics predict RUN --chain always-trust --min-rounds 0..3",
            "debate dynamics predict RUN --chain true-to-skeptic my-chain.toml",
            "debate dynamics predict RUN --stop posterior:0.8 posterior:0.9 posterior:0.95",
        ),
    )
    p.add_argument("run", type=Path, help="the experiment run folder to fit")
    p.add_argument(
        "--chain", nargs="+", default=None, metavar="NAME|FILE", help="chains to predict (default: the run's)"
    )
    p.add_argument("--min-rounds", type=_rounds, default=None, metavar="N|A..B", help="default: the run's")
    p.add_argument("--max-rounds", type=int, default=None, help="default: the run's")
    p.add_argument(
        "--stop",
        nargs="+",
        type=_stop,
        default=[],
        metavar="posterior:P",
        help="also predict the posterior stop at these thresholds (each chain, max rounds as above), decided by the "
        "run's own fit as `fit --save` writes it",
    )
    p.add_argument("--out", type=Path, default=None, help="folder for the plot (default: RUN/dynamics)")
    p.set_defaults(handler=_predict)
    return p


def _add_simulate(dyn: Any) -> None:
    s = dyn.add_parser(
        "simulate",
        help="the real engine against a simulated population on 127.0.0.1",
        epilog=examples("debate dynamics simulate --roles roles.toml --n 2000 --out runs/sim"),
    )
    s.add_argument(
        "--roles",
        type=Path,
        required=True,
        help="a roles file: [roles.NAME] factual_true, "
        "hallucinated_true, conformity, memory, [roles.NAME.states.STATE]; [[classes]] share, "
        "factual_true, hallucinated_true, [classes.roles.NAME]; and seed",
    )
    s.add_argument(
        "--model", default="simulated", metavar="NAME", help="the model name the population answers as (the run's)"
    )
    s.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="ROLE=NAME:FILE",
        help="put ROLE on another simulated model NAME, whose agents follow the roles file FILE, behind an endpoint "
        "of its own (repeatable): a team of several models, as `--roles ROLE.model...` makes one",
    )
    s.add_argument("--chain", default="true-to-skeptic", metavar="NAME|FILE", help="the chain to run")
    s.add_argument("--min-rounds", type=int, default=2, help="minimum debate rounds")
    s.add_argument("--max-rounds", type=int, default=5, help="maximum debate rounds")
    s.add_argument("--n", type=int, default=2000, help="simulated claims")
    s.add_argument("--share-true", type=float, default=0.5, help="share of factual claims")
    s.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the agents' draws (default: the roles file's "
        "seed, which always fixes the items and their labels): runs with different seeds are independent "
        "runs on the same items, as validate needs",
    )
    s.add_argument(
        "--items-seed",
        type=int,
        default=None,
        help="draw other items (other ids, labels and difficulty classes) from this seed: where a calibration "
        "fitted on one run is tried",
    )
    s.add_argument("--calibration", default=None, metavar="FILE", help="a calibration file (p_factual per claim)")
    s.add_argument("--stop", default="consensus", metavar="consensus|posterior:P", help="the stop rule")
    s.add_argument("--force", action="store_true", help="let --stop posterior use an uncalibrated calibration")
    s.add_argument(
        "--out", type=Path, required=True, help="the run folder to write (fit, predict and validate read it)"
    )
    s.set_defaults(handler=_simulate)


def _fit(args: argparse.Namespace) -> int:
    from experiments.dynamics.commands import fit_command

    return fit_command(args)


def _predict(args: argparse.Namespace) -> int:
    from experiments.dynamics.commands import predict_command

    return predict_command(args)


def _validate(args: argparse.Namespace) -> int:
    from experiments.dynamics.commands import validate_command

    return validate_command(args)


def _team(model: str, entries: list[str]) -> Any:
    """`--model` and `--role ROLE=NAME:FILE` entries as the run's team of simulated models."""
    from experiments.dynamics.simulate import load_population
    from experiments.dynamics.simulate_run import Team

    roles: dict[str, tuple[str, Any]] = {}
    for entry in entries:
        role, eq, rest = entry.partition("=")
        name, colon, path = rest.partition(":")
        if not (eq and colon and role.strip() and name.strip() and path.strip()):
            raise UsageError(f"--role {entry!r}: give ROLE=NAME:FILE (the role, its model's name, its roles file)")
        if name.strip() == model:
            raise UsageError(f"--role {entry!r}: {model!r} is --model's name; another model needs another name")
        population = load_population(Path(path.strip()))
        if any(n == name.strip() and p != population for n, p in roles.values()):
            raise UsageError(f"--role {entry!r}: model {name.strip()!r} is given another roles file already")
        roles[role.strip()] = (name.strip(), population)
    return Team(model=model, roles=roles)


def _simulate(args: argparse.Namespace) -> int:
    from experiments.dynamics.simulate_run import simulate_run

    if args.n < 1 or not 0 < args.share_true < 1:
        raise UsageError("--n must be at least 1 and --share-true between 0 and 1")
    summary = simulate_run(
        args.roles,
        chain=args.chain,
        min_rounds=args.min_rounds,
        max_rounds=args.max_rounds,
        n=args.n,
        share_true=args.share_true,
        out=output_folder(args.out, "--out"),
        seed=args.seed,
        items_seed=args.items_seed,
        governed={"calibration": args.calibration, "stop": args.stop, "force_calibration": args.force or None},
        team=_team(args.model, args.role),
    )
    sys.stdout.write(summary + "\n")
    return 0
