"""Cost before and after the run: `--estimate` (debate.pipeline: calls, tokens and cost without calling the model),
`--max-cost` (a batch stops cleanly before the items that would pass it) and the run's actual tokens and cost."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from debate.cli.conventions import out
from debate.config import VerifierConfig
from debate.errors import UsageError
from debate.pipeline import price_for, team_cost  # resolved lazily: the prices alone, no engine
from debate.plugins import TASKS, Task, TaskInput
from debate.results import BatchItem, BatchSummary, PredictionRecord, ResultRecord, read_items, read_records
from debate.types import Report, Usage

if TYPE_CHECKING:
    from debate.calls import PromptTemplate
    from debate.engine import MarkovChain
    from debate.pipeline import Behaviour, Estimate, Price, Range, Verifier

# The engine and the pipeline are imported where they are used: `debate --help` builds this module's options and
# need not pay for the debate team, the HTTP clients and numpy.

__all__ = [
    "CostGate",
    "add_cost_arguments",
    "cost_gate",
    "cost_line",
    "estimate_lines",
    "print_estimate",
    "run_endpoints",
    "run_estimate",
    "run_prices",
]


def add_cost_arguments(parser: argparse.ArgumentParser, *, max_cost: bool = True) -> None:
    """--estimate, --estimate-from and --agreement; --max-cost where the command enforces it (a batch)."""
    cost = parser.add_argument_group("cost")
    cost.add_argument(
        "--estimate",
        action="store_true",
        help="print the expected model calls, tokens and cost of the run, and stop without calling "
        "the model (default: off)",
    )
    cost.add_argument(
        "--estimate-from",
        type=Path,
        metavar="RESULTS",
        help="--estimate: fit the agents' behaviour from a pilot run's results log (default: assume --agreement)",
    )
    cost.add_argument(
        "--agreement",
        type=float,
        default=0.9,
        metavar="P",
        help="--estimate: the share of turns that keep the verdict they are shown, where no pilot says (default: 0.9)",
    )
    if not max_cost:
        return
    cost.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop the batch cleanly (exit 4, records kept) before an item that would take the run "
        "past this cost (default: none)",
    )


def _prompts(chain: MarkovChain, config: VerifierConfig) -> dict[str, PromptTemplate]:
    from debate.calls import load_prompt

    return {role: load_prompt(chain.spec.prompt_name(role), config.prompt_set) for role in chain.spec.all_roles()}


def _figures(
    args: argparse.Namespace,
    config: VerifierConfig,
    items: list[tuple[Task, TaskInput]],
    price: Price | None,
    prices: dict[str, Price | None] | None = None,
) -> Estimate:
    from debate.engine import load_chain
    from debate.pipeline import estimate, planned_models, team_prices

    chain = load_chain(config.debate.chain)
    _check_calibration(config, chain)
    if prices is None:
        planned = {name: model for name, (model, _) in planned_models(config, chain).items()}
        prices = team_prices(planned, embedded=config.model.base_url is None)
    return estimate(
        items,
        config=config,
        chain=chain,
        prompts=_prompts(chain, config),
        behaviour=_behaviour(args, chain),
        price=price,
        prices=prices,
    )


def _check_calibration(config: VerifierConfig, chain: MarkovChain) -> None:
    """Refuse the calibration the run would refuse (unreadable, another chain, prompts or model, the posterior
    stop's refusal), before any figure: an estimate of a run that cannot start is no estimate."""
    if config.debate.calibration is None:
        return
    from debate.calibration import LiveCalibration
    from debate.llm import embedded_model_config
    from debate.plugins import TEAMS

    hashes = TEAMS.get(config.team)(prompts_dir=config.prompt_set).prompt_hashes(chain)
    live = LiveCalibration(config.debate, chain, hashes)
    # The models the run would send, as a start resolves them (the embedded one's settings included); an
    # endpoint's only model is not known without asking it, which an estimate does not.
    base = config.model
    if base.base_url is None:
        base = embedded_model_config(base, "http://127.0.0.1/v1")
    team = {}
    for role in chain.spec.all_roles():
        given = config.roles.get(role)
        model = base if given is None else given.model.over(base)
        if model.model is None:
            return
        team[role] = model.identity()
    live.bind_team(team)


def _behaviour(args: argparse.Namespace, chain: MarkovChain) -> Behaviour:
    from debate.pipeline import assumed_behaviour, fitted_behaviour

    if not 0.0 <= args.agreement <= 1.0:
        raise UsageError(f"--agreement must be between 0 and 1, got {args.agreement}")
    if args.estimate_from is None:
        return assumed_behaviour(args.agreement)
    if not args.estimate_from.is_file():
        raise UsageError(f"--estimate-from: no such file: {args.estimate_from}")
    reports = list(_reports(args.estimate_from))
    try:
        return fitted_behaviour(reports, chain, source=str(args.estimate_from), agreement=args.agreement)
    except UsageError as exc:
        raise UsageError(f"--estimate-from: {exc}") from exc


def _reports(path: Path) -> Iterator[Report]:
    """The reports of a results log (`debate verify --output`) or of an experiment's results.jsonl."""
    for record in read_records(path):
        if isinstance(record, ResultRecord):
            yield record.result
        elif isinstance(record, PredictionRecord) and record.report is not None:
            try:
                yield Report.model_validate(record.report)
            except ValidationError:
                continue  # a method whose record is not a debate's report (a judge's transcript)


def _batch_inputs(path: Path, task: Task) -> tuple[list[tuple[Task, TaskInput]], list[str]]:
    items, skipped = [], []
    for line, item, error in read_items(path):
        if item is None:
            skipped.append(error or f"line {line}: unreadable")
            continue
        items.append((task, _task_input(item)))
    return items, skipped


def _task_input(item: BatchItem) -> TaskInput:
    return TaskInput(
        response=item.response, question=item.question, reference=item.evidence(), claims=item.claim_texts(), id=item.id
    )


def run_estimate(args: argparse.Namespace, config: VerifierConfig, single: TaskInput | None) -> int:
    """Print the estimate for the batch (--input) or the one response, without starting any model."""
    task: Task = TASKS.get(args.task)()
    skipped: list[str] = []
    if single is not None:
        items = [(task, single)]
    else:
        items, skipped = _batch_inputs(args.input, task)
    return print_estimate(args, config, items, skipped)


def print_estimate(
    args: argparse.Namespace, config: VerifierConfig, items: list[tuple[Task, TaskInput]], skipped: Sequence[str] = ()
) -> int:
    """Print (or with --json, write) the estimate of `items` under `config`."""
    price = price_for(config.model, embedded=config.model.base_url is None)
    figures = _figures(args, config, items, price)
    notes = [*figures.notes, *(f"not estimated: {why}" for why in skipped)]
    if price is None:
        named = config.model.model or "(the endpoint's only model)"
        notes.append(f"no price known for model {named}: give --model.price-in/--model.price-out")
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps({**figures.model_dump(mode="json"), "notes": notes}, indent=2) + "\n")
        return 0
    for line in estimate_lines(figures, config, notes):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _fmt(r: Range, unit: str = "", digits: int = 0) -> str:
    def one(v: float) -> str:
        return f"{unit}{v:,.{digits}f}"

    return f"{one(r.expected)} (range {one(r.low)} to {one(r.high)})"


def estimate_lines(figures: Estimate, config: VerifierConfig, notes: Sequence[str]) -> list[str]:
    """The estimate as a user reads it: every figure with its range, and what it assumes."""
    debate = config.debate
    lines = [
        f"estimate for {figures.items} item(s), {figures.claims:g} claim(s); chain {debate.chain}, rounds "
        f"{debate.min_rounds} to {debate.max_rounds}; no model was called",
        f"  agents: {figures.behaviour}",
        f"  stop: {figures.stop}",
        f"  debate turns per claim: {_fmt(figures.turns_per_claim, digits=1)}",
        f"  model calls: {_fmt(figures.calls)}",
        f"  input tokens: {_fmt(figures.input_tokens)} (about 4 characters per token)",
        f"  output tokens: {_fmt(figures.output_tokens)}",
    ]
    if len(figures.models) > 1:
        for model in figures.models:
            speaks = ", ".join(model.roles) or "no debate role"
            extra = " and every call outside the debate" if model is figures.models[0] else ""
            cost = f", {_fmt(model.cost_usd, '$', 4)}" if model.cost_usd is not None else ", no price known"
            at = f" at {model.price.describe()}" if model.price is not None and model.cost_usd is not None else ""
            lines.append(f"  model {model.name} ({speaks}{extra}): {_fmt(model.calls)} calls{cost}{at}")
        if figures.cost_usd is not None:
            lines.append(f"  cost: {_fmt(figures.cost_usd, '$', 4)}, the sum over the team's models")
    elif figures.cost_usd is not None and figures.price is not None:
        lines.append(f"  cost: {_fmt(figures.cost_usd, '$', 4)} at {figures.price.describe()}")
    lines += [f"  note: {note}" for note in notes]
    return lines


def _tokens(usage: Usage) -> str:
    return f"{usage.llm_calls} model calls, {usage.prompt_tokens:,} input and {usage.completion_tokens:,} output tokens"


def cost_line(
    by_model: dict[str, Usage], prices: dict[str, Price | None], endpoints: dict[str, str] | None = None
) -> str:
    """The run's actual tokens and, with a price for every model used, cost: one model's at its price, a team's
    as the sum and each model's part, and (`endpoints`: each model's host) each endpoint's part where the team
    spans several, which is what each provider's invoice reads."""
    used = {name: usage for name, usage in by_model.items() if usage.llm_calls or usage.prompt_tokens}
    total = Usage.total(by_model.values())
    if len(used) <= 1:
        name = next(iter(used), next(iter(by_model), ""))
        price = prices.get(name)
        if price is None:
            return f"{_tokens(total)} (no price known: give --model.price-in/--model.price-out for the cost)"
        if price.source == "local":
            return f"{_tokens(total)} (a local model: no cost)"
        cost, _ = team_cost({name: total}, {name: price})
        return f"{_tokens(total)}, ${cost:.4f} at {price.describe()}"
    cost, unpriced = team_cost(used, prices)
    parts = []
    for name, usage in used.items():
        price = prices.get(name)
        own = f"${team_cost({name: usage}, {name: price})[0]:.4f}" if price is not None else "no price known"
        parts.append(f"{name}: {usage.llm_calls} calls, {own}")
    said = f"${cost:.4f}" if cost is not None else f"no cost: no price known for {', '.join(unpriced)}"
    return f"{_tokens(total)}, {said} ({'; '.join(parts)})" + _by_endpoint(used, prices, endpoints or {})


def _by_endpoint(used: dict[str, Usage], prices: dict[str, Price | None], endpoints: dict[str, str]) -> str:
    hosts: dict[str, dict[str, Usage]] = {}
    for name, usage in used.items():
        hosts.setdefault(endpoints.get(name, "?"), {})[name] = usage
    if len(hosts) < 2:
        return ""
    parts = []
    for host, models in hosts.items():
        cost, _ = team_cost(models, prices)
        calls = sum(u.llm_calls for u in models.values())
        parts.append(f"{host} {calls} calls, " + (f"${cost:.4f}" if cost is not None else "no price known"))
    return f"; by endpoint: {'; '.join(parts)}"


def run_endpoints(verifier: Verifier) -> dict[str, str]:
    """Each model of a started Verifier's team by the name its reports give it, and the host it is served from
    (`embedded`: the embedded model)."""
    from urllib.parse import urlparse

    embedded = verifier.runtime.model_config.base_url if verifier.embedded else None
    return {
        name: "embedded" if model.base_url in (None, embedded) else urlparse(model.base_url).netloc
        for name, model in verifier.runtime.model_configs().items()
    }


def run_prices(verifier: Verifier) -> dict[str, Price | None]:
    """Each model of a started Verifier's team by the name its reports give it, at its price."""
    from debate.pipeline import team_prices

    return team_prices(verifier.runtime.model_configs(), embedded=verifier.embedded)


class CostGate:
    """`--max-cost` for a batch: an item starts only while the cost of the finished items (each model's usage at its
    own price), plus a reservation for every item still running and for this one, stays within the limit. Each
    item is reserved at the most one item may cost by the estimate (every claim to the rounds' limit, escalated
    through every cascade team, each reply re-asked to the limit and as long as max_tokens), or at the most the
    finished items cost apiece where that is more (the endpoint's tokenizer counts, not the estimate's 4
    characters a token), so the items in flight cannot take the run past the limit together."""

    def __init__(self, limit: float, prices: dict[str, Price | None], reserve: float) -> None:
        if limit <= 0:
            raise UsageError(f"--max-cost must be positive, got {limit}")
        self.limit, self.prices, self.reserve = limit, prices, reserve
        self.started = 0
        self._seen = (0.0, 0)  # spent and items finished when last asked

    def __call__(self, item: BatchItem | None, summary: BatchSummary) -> str | None:
        spent, _ = team_cost(summary.usage_by_model, self.prices)
        spent = spent or 0.0
        finished = summary.processed
        if finished > self._seen[1]:
            # what the items finished since the last item started cost apiece, at most
            self.reserve = max(self.reserve, (spent - self._seen[0]) / (finished - self._seen[1]))
            self._seen = (spent, finished)
        running = max(0, self.started - finished)
        if spent + (running + 1) * self.reserve > self.limit:
            return (
                f"--max-cost ${self.limit:g}: ${spent:.4f} spent, {running} item(s) running, each item reserved at "
                f"${self.reserve:.4f} (the most one may cost by the estimate, or by the items finished)"
            )
        self.started += 1
        return None


def cost_gate(args: argparse.Namespace, config: VerifierConfig, verifier: Verifier) -> CostGate | None:
    """The gate for --max-cost, priced for each resolved model of the started team (None without --max-cost)."""
    if args.max_cost is None:
        return None
    from debate.engine import load_chain
    from debate.pipeline import planned_models

    prices = run_prices(verifier)
    unpriced = [name for name, price in prices.items() if price is None]
    if unpriced:
        raise UsageError(
            f"--max-cost needs a price: no list price is known for {', '.join(unpriced)}; give "
            "--model.price-in/--model.price-out (a role's model: --roles ROLE.model.price_in=USD)"
        )
    items, _ = _batch_inputs(args.input, TASKS.get(args.task)())
    # The estimate names the models before the run: each by its roles' resolved model here.
    labels, default = verifier.runtime.role_labels(), verifier.client.model_name
    planned = planned_models(config, load_chain(config.debate.chain))
    by_plan = {
        name: prices[labels.get(roles[0], default) if roles else default] for name, (_, roles) in planned.items()
    }
    figures = _figures(args, config, items, prices[default], by_plan)
    if figures.item_cost_most is None:
        raise UsageError("--max-cost needs a price for every model the run may call (the estimate has none for one)")
    return CostGate(args.max_cost, prices, figures.item_cost_most)
