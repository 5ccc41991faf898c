"""`debate eval`, `debate ablate` and `debate report`, added to the `debate` command by entry point."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from debate.calls import PROMPT_SETS
from debate.cli import (
    add_command,
    add_command_group,
    examples,
)
from debate.cli.conventions import Subcommands
from debate.cli.cost import add_cost_arguments, print_estimate
from debate.errors import UsageError
from debate.plugins import TASKS, TaskInput
from experiments.ablate_cli import ablate_min_rounds, ablate_prompt_sets, ablate_replot, ablate_transitions
from experiments.ablate_teams import ablate_teams
from experiments.cli_common import (
    add_run_arguments,
    run_one,
    run_spec,
)
from experiments.methods import METHODS
from experiments.report_cli import report
from experiments.runner import RunSpec, items_for, method_config

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add eval, ablate and report to the `debate` subcommands."""
    _register_eval(sub)
    _register_ablate(sub)
    _register_report(sub)


def _register_eval(sub: Subcommands) -> None:
    ev_sub = add_command_group(
        sub,
        "eval",
        extra="experiments",
        dest="benchmark",
        metavar="BENCHMARK",
        help="run a benchmark (HaluEval, FactPrompts) with a method and its baselines",
    )
    halu = ev_sub.add_parser(
        "halueval",
        help="HaluEval qa / dialogue / summarization / general",
        epilog=examples(
            "debate eval halueval --task qa                       # 150 items, the paper's QA setting",
            "debate eval halueval --task summarization --method single",
            "debate eval halueval --task qa --n all --model.base-url http://localhost:8000/v1 "
            "--model.max-concurrency 16",
            "debate eval halueval --task qa --method halueval-judge --knowledge none",
        ),
    )
    halu.add_argument(
        "--task", choices=["qa", "dialogue", "summarization", "general"], required=True, help="which HaluEval file"
    )
    add_run_arguments(
        halu, n_help="items, or all (default: the paper's size: qa 150, dialogue 150, summarization 50; general 150)"
    )
    add_cost_arguments(halu, max_cost=False)
    halu.set_defaults(handler=_eval)
    fact = ev_sub.add_parser(
        "factprompts",
        help="FactPrompts KB-QA (50 responses, 233 annotated claims)",
        epilog=examples(
            "debate eval factprompts --level claim",
            "debate eval factprompts --level response --search.backend local --search.collection wiki.jsonl",
        ),
    )
    fact.add_argument(
        "--level",
        choices=["claim", "response"],
        default="claim",
        help="judge each annotated claim, or each response from its annotated claims",
    )
    add_run_arguments(fact, n_help="items, or all (default: all: 233 claims or 50 responses)", halueval=False)
    add_cost_arguments(fact, max_cost=False)
    fact.set_defaults(handler=_eval, task="kbqa")


def _register_ablate(sub: Subcommands) -> None:
    ab_sub = add_command_group(
        sub,
        "ablate",
        extra="experiments",
        dest="ablation",
        metavar="ABLATION",
        help="the paper's ablations, with a table and plots (PNG and SVG)",
    )
    tr = ab_sub.add_parser(
        "transitions",
        help="Table 4: the four transition rules on QA (min rounds 2)",
        epilog=examples("debate ablate transitions --n 80", "debate ablate transitions --n 150 --model.base-url URL"),
    )
    add_run_arguments(
        tr, n_default=80, with_method=False, fixed={"debate.chain": "true-to-skeptic", "debate.min_rounds": 2}
    )
    tr.set_defaults(handler=ablate_transitions)
    mr = ab_sub.add_parser(
        "min-rounds",
        help="Figure 3: min rounds 0-3 on qa, dialogue and summarization",
        epilog=examples("debate ablate min-rounds --n 50", "debate ablate min-rounds --n 20 --tasks qa"),
    )
    add_run_arguments(
        mr,
        with_method=False,
        fixed={"debate.min_rounds": 0},
        n_help="items per task, or all (default: the paper's sizes, which Figure 3 reuses: qa 150, dialogue "
        "150, summarization 50)",
    )
    mr.add_argument(
        "--tasks",
        nargs="+",
        choices=["qa", "dialogue", "summarization"],
        default=["qa", "dialogue", "summarization"],
        help="tasks to run",
    )
    mr.set_defaults(handler=ablate_min_rounds)
    _register_prompt_set_and_replot(ab_sub)
    _register_teams(ab_sub)


def _register_teams(ab_sub: Subcommands) -> None:
    te = ab_sub.add_parser(
        "teams",
        help="team compositions (a model per role, the cascade): accuracy, calls and cost, and the Pareto front",
        epilog=examples(
            "debate ablate teams --teams teams.toml --n 80", "debate ablate teams --teams t.toml --task dialogue"
        ),
    )
    add_run_arguments(te, n_default=80, with_method=False)
    te.add_argument("--task", choices=["qa", "dialogue", "summarization"], default="qa", help="which HaluEval file")
    te.add_argument(
        "--teams",
        type=Path,
        required=True,
        metavar="FILE",
        help="a TOML file of [[team]] entries: name, and the [team.model], [team.roles.ROLE.model] and "
        "[team.debate] settings it changes",
    )
    te.set_defaults(handler=ablate_teams)


def _register_prompt_set_and_replot(ab_sub: Subcommands) -> None:
    ps = ab_sub.add_parser(
        "prompt-set",
        help="the paper's prompt set against the tuned one (and any directory)",
        epilog=examples("debate ablate prompt-set --n 80", "debate ablate prompt-set --sets paper my-prompts/"),
    )
    add_run_arguments(ps, n_default=80, with_method=False, fixed={"prompt_set": "paper"})
    ps.add_argument("--task", choices=["qa", "dialogue", "summarization"], default="qa", help="which HaluEval file")
    ps.add_argument(
        "--sets",
        nargs="+",
        default=list(PROMPT_SETS),
        metavar="NAME|DIR",
        help=f"prompt sets to compare (default: {' '.join(PROMPT_SETS)})",
    )
    ps.set_defaults(handler=ablate_prompt_sets)
    rp = ab_sub.add_parser(
        "replot",
        help="redraw an ablation's table.md and plots from its finished runs (no model calls)",
        epilog=examples(
            "debate ablate replot runs/ablate-transitions",
            "debate ablate replot results/embedded-paper/ablate-transitions",
        ),
    )
    rp.add_argument("folder", type=Path, help="a folder made by `debate ablate transitions|min-rounds|prompt-set`")
    rp.set_defaults(handler=ablate_replot)


def _register_report(sub: Subcommands) -> None:
    rep = add_command(
        sub,
        "report",
        report,
        extra="experiments",
        help="one table of several runs, with CIs (markdown, csv or json)",
        epilog=examples(
            "debate report runs/*/",
            "debate report results/embedded-paper/2026*/ --format csv > runs.csv",
            "debate report rag-results.jsonl       # average risk, high-risk share, citation figures",
        ),
    )
    rep.add_argument(
        "runs",
        nargs="+",
        type=Path,
        help="run folders (unfinished ones are skipped with a note), or results logs (.jsonl of `debate "
        "verify --input ... --output`): their RAG answers get the RAG citation rules' monitoring figures",
    )
    rep.add_argument("--format", choices=["md", "csv", "json"], default="md", help="output format")
    rep.add_argument(
        "--with-gone",
        action="store_true",
        help="results logs: also count the records whose input line is gone (kept in LOG's history since a re-run "
        "over an input without them)",
    )
    rep.add_argument(
        "--recompute",
        action="store_true",
        help="first recompute each finished run's metrics.json and results.md from its results.jsonl "
        "(no model calls; after a metrics change)",
    )


def _eval(args: argparse.Namespace) -> int:
    spec = run_spec(args)
    if args.estimate:
        return _estimate(spec, args)
    run_dir, _ = run_one(spec, args)
    sys.stdout.write((run_dir / "results.md").read_text())
    return 0


def _estimate(spec: RunSpec, args: argparse.Namespace) -> int:
    """`debate eval ... --estimate`: the run's expected calls, tokens and cost, with no model call."""
    if not METHODS.get(spec.method).estimable:
        raise UsageError(f"--estimate predicts the debate's calls (methods mcmad, single); {spec.method} makes its own")
    items = [
        (
            TASKS.get(item.task)(),
            TaskInput(
                response=item.response, question=item.question, reference=item.reference, claims=item.claims, id=item.id
            ),
        )
        for item in items_for(spec)
    ]
    return print_estimate(args, method_config(spec), items)
