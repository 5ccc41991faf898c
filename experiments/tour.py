"""`debate tour`: a debate run to its end, for a newcomer to watch.

On a model (the embedded one by default) the tour verifies one wrong answer against its knowledge and prints the
whole report: the chain, why it moved, every opinion. With `--simulated`, agents of stated accuracies (the dynamics
population, no model) debate a wrong and a right answer, so one sees what a debate between capable agents looks
like; every panel says simulated, and the opinions say how each verdict was drawn.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from debate.cli.conventions import Subcommands, add_command, err, examples, out
from debate.cli.options import add_verifier_arguments, verifier_config
from debate.cli.render import render_report
from debate.concurrency import run_blocking
from debate.config import VerifierConfig
from debate.llm import ChatClient
from debate.plugins import TaskInput

if TYPE_CHECKING:
    from experiments.dynamics.simulate import Population

__all__ = ["register", "tour_population"]

QUESTION = "When was the Eiffel Tower completed?"
KNOWLEDGE = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 as the entrance to "
    "the World's Fair, and at 300 metres it was the tallest structure in the world until 1930."
)
ANSWERS = [("tour-wrong", "It was completed in 1925.", False), ("tour-right", "It was completed in 1889.", True)]
"""(item, answer, whether it is factual): the simulated agents need the truth to be right or wrong at their rates."""


def tour_population() -> Population:
    """Agents that are usually right and sometimes follow the opinion they are shown: stated, not measured. (A
    function: the simulation modules are imported when the tour runs, not when `debate --help` lists it.)"""
    from experiments.dynamics.simulate import Population, RoleParameters

    return Population(
        seed=3,
        roles={
            "initial": RoleParameters(factual_true=0.85, hallucinated_true=0.25),
            "trust": RoleParameters(factual_true=0.9, hallucinated_true=0.2, conformity=0.3),
            "skeptic": RoleParameters(factual_true=0.75, hallucinated_true=0.05, conformity=0.1),
            "leader": RoleParameters(factual_true=0.9, hallucinated_true=0.1, conformity=0.2),
        },
    )


SIMULATED = "SIMULATED agents, not a model"


def register(sub: Subcommands) -> None:
    """Add `debate tour` to the `debate` parser's subcommands."""
    parser = add_command(
        sub,
        "tour",
        _tour,
        help="watch a debate run to its end (embedded model, your endpoint, or --simulated)",
        description="Verify the tour's example answer and print the whole debate: the chain, why it moved, every "
        "opinion. --simulated: agents of stated accuracies instead of a model, every output marked so.",
        epilog=examples(
            "debate tour                                     # the embedded 135M model: the machinery, not accuracy",
            "debate tour --simulated                         # what a debate between capable agents looks like",
            "debate tour --model.base-url http://localhost:8000/v1 # your own model",
        ),
    )
    parser.add_argument(
        "--simulated",
        action="store_true",
        help="agents of stated accuracies answer instead of a model (none is started)",
    )
    parser.add_argument(
        "--population",
        type=Path,
        metavar="FILE",
        help="the simulated agents' roles file (as `debate dynamics simulate --roles` reads; default: the tour's "
        "own, printed). --roles is the configuration's model per role, as for every command",
    )
    add_verifier_arguments(parser, batch=False)


def _tour(args: argparse.Namespace) -> int:
    config = verifier_config(args)
    if not args.simulated:
        return run_blocking(_run(config, None, ANSWERS[:1], banner=None))
    from experiments.dynamics.simulate import SimulatedAgents, load_population

    population = load_population(args.population) if args.population is not None else tour_population()
    out.print(_population_table(population))
    from debate.engine import load_chain

    chain = load_chain(config.debate.chain)
    agents = SimulatedAgents(population, chain, {item: truth for item, _, truth in ANSWERS}, explain=True)
    return run_blocking(_run(config, agents, ANSWERS, banner=SIMULATED))


async def _run(
    config: VerifierConfig, client: ChatClient | None, answers: list[tuple[str, str, bool]], banner: str | None
) -> int:
    from debate.pipeline import Verifier

    async with Verifier(config=config, client=client) as verifier:
        if client is None:
            where = "embedded llama.cpp: the machinery, not the method's accuracy" if verifier.embedded else "yours"
            err.print(f"[dim]model: {verifier.client.model_name} ({where})[/]")
        for item, answer, truth in answers:
            report = await verifier.verify(
                TaskInput(answer, question=QUESTION, reference=KNOWLEDGE, id=item), task="qa"
            )
            out.rule(f"{QUESTION}  {answer!r}" + (f"  (truly {'factual' if truth else 'wrong'})" if banner else ""))
            render_report(report, out, banner=banner)
    return 0


def _population_table(population: Population) -> Table:
    table = Table(
        title=f"{SIMULATED}: each verdict is drawn at these stated rates (seed {population.seed})", title_justify="left"
    )
    for column in ("role", "P(says true | factual)", "P(says true | wrong)", "repeats what it is shown"):
        table.add_column(column)
    for role in ("initial", "trust", "skeptic", "leader"):
        r = population.role(role)
        table.add_row(role, f"{r.factual_true:.2f}", f"{r.hallucinated_true:.2f}", f"{r.conformity:.2f}")
    return table
