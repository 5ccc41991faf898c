"""Cost before the run (`debate verify|eval --estimate`): expected model calls, tokens and cost, without calling the
model.

- **Claims per item** come from the task (`TaskWork`: exact for QA pairs, given claims and RAG sentences; one per
  sentence otherwise), and the calls before the debates (extraction, the subjective filter) and outside them
  (search queries, prefilters) from the task and each prefilter.
- **Turns per claim** are the chain's exact expectation (debate.engine._expectation, the machinery of `debate dynamics
  predict`) under a stated behaviour: fitted from a pilot run's transcripts (`--estimate-from RESULTS`: for each
  class of claim by its initial verdict, each role's rate of saying true after each verdict it is shown), or
  assumed (agents keep the verdict they are shown at `--agreement`). The range runs from every state agreeing at
  min_rounds to none agreeing before max_rounds. Under `--debate.stop posterior:P` the turns are the posterior
  stop's exact expectation under the calibration's own fitted behaviour; under cascade:P and voi:P, each team's
  (debate.pipeline._cascade_cost, _voi_cost).
- **Tokens**: input from the rendered prompts' characters (about 4 per token; the endpoint's tokenizer decides),
  output from the pilot's mean per call, else an assumed typical reply, up to max_tokens at the top of the range.
- **Cost** from `--model.price-in/--model.price-out` (USD per million tokens) or the price table
  (debate.pipeline._prices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from debate.calibration import describe_stop
from debate.calls import PromptTemplate
from debate.config import VerifierConfig
from debate.engine import MarkovChain
from debate.pipeline._behaviour import Behaviour, assumed_behaviour, debate_turns, fitted_behaviour
from debate.pipeline._cascade_cost import CASCADE_NOTE, governed, most_cost, run_models
from debate.pipeline._prices import Price
from debate.pipeline._range import ZERO, Range
from debate.pipeline._team_cost import ModelEstimate
from debate.pipeline._voi_cost import teams_plan
from debate.pipeline._work import prefilter_calls, task_work
from debate.plugins import Task, TaskInput, TaskWork
from debate.sentences import guess_language

__all__ = ["Behaviour", "Estimate", "Range", "assumed_behaviour", "estimate", "fitted_behaviour"]

CHARS_PER_TOKEN = 4.0
"""Characters per token for English text under the common BPE tokenizers; other scripts use fewer per token."""


class ItemEstimate(BaseModel):
    """One item's expected work."""

    model_config = ConfigDict(frozen=True)

    claims: float
    """Expected claims."""
    calls: Range
    """Model calls."""
    input_tokens: Range
    """Prompt tokens."""
    output_tokens: Range
    """Completion tokens."""
    debate_calls: Range = ZERO
    """The debate's part of `calls` (the turns, which a team may spread over several models)."""
    debate_input_tokens: Range = ZERO
    """The debate's part of `input_tokens`."""
    debate_output_tokens: Range = ZERO
    """The debate's part of `output_tokens`."""


_DEBATE_PARTS = ("debate_calls", "debate_input_tokens", "debate_output_tokens")
_ALL = ("calls", "input_tokens", "output_tokens", *_DEBATE_PARTS)
_SPLIT_NOTE = (
    "the debate's turns are split among the roles' models by the chain's states (exact for the paper's chains "
    "under the consensus stop)"
)


class Estimate(BaseModel):
    """The expected work and cost of a run, before it starts."""

    model_config = ConfigDict(frozen=True)

    items: int = Field(ge=0)
    """Items estimated."""
    claims: float
    """Expected claims over all items."""
    turns_per_claim: Range
    """Debate turns per debated claim."""
    calls_per_claim: Range
    """Debate calls per debated claim (turns times re-asks)."""
    calls: Range
    """Model calls over the run."""
    input_tokens: Range
    """Prompt tokens over the run."""
    output_tokens: Range
    """Completion tokens over the run."""
    cost_usd: Range | None
    """Cost, when a price is known."""
    price: Price | None
    """`[model]`'s price."""
    models: list[ModelEstimate] = Field(default_factory=list)
    """Each model of the team: the calls, tokens and cost of its roles' turns (`[model]`'s with every call outside
    the debate). `cost_usd` is their sum."""
    behaviour: str
    """Where the agents' behaviour comes from (said with the figures)."""
    stop: str = ""
    """The stop rule the turns are estimated under, in a line (the paper's consensus, or the posterior stop and the
    calibration that decides it)."""
    notes: list[str] = Field(default_factory=list)
    """What the estimate leaves out or assumes."""
    item_cost_most: float | None = None
    """The most one item may cost (the high end of an item as large as the largest in every part): what
    `--max-cost` reserves for each item in flight. None when a model has no price."""


def _tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


@dataclass(frozen=True)
class _Debate:
    chain: MarkovChain
    prompts: dict[str, PromptTemplate]
    behaviour: Behaviour
    turns: Range
    config: VerifierConfig

    def turn_chars(self, work: TaskWork) -> float:
        """Characters one debate call sends: a role's prompt with the claim, its evidence and shown opinions."""
        sizes = []
        for role, prompt in self.prompts.items():
            shown = {"nothing": 0.0, "previous": 1.0, "round": 2.0}[self.chain.spec.role(role).sees]
            sizes.append(
                len(prompt.system)
                + len(prompt.user)
                + work.claim_chars
                + work.evidence_chars
                + shown * self.behaviour.opinion_chars
            )
        return sum(sizes) / len(sizes)

    @property
    def calls_per_claim(self) -> Range:
        """Turns times calls per turn: none re-asked at the low end, each to the limit at the high end."""
        per_turn = self.behaviour.calls_per_turn
        most = 1.0 + self.config.debate.max_parse_retries
        turns = self.turns
        return Range(expected=turns.expected * per_turn, low=turns.low, high=turns.high * most)

    def item(self, work: TaskWork, prefilter_calls: Range) -> ItemEstimate:
        retries = self.config.debate.max_parse_retries
        debate = self.calls_per_claim.scaled(work.claims)
        other = Range(
            expected=work.calls + work.claim_calls * work.claims,
            low=work.calls,
            high=(work.calls + work.claim_calls * work.claims) * (1 + retries),
        )
        turn_in = _tokens(self.turn_chars(work))
        other_in = _tokens(work.input_chars) + work.claim_calls * work.claims * _tokens(work.claim_chars + 2000)
        inputs = debate.scaled(turn_in) + Range(expected=other_in, low=other_in, high=other_in * (1 + retries))
        inputs = inputs + prefilter_calls.scaled(_tokens(work.claim_chars + work.evidence_chars + 400))
        max_out = float(self.config.model.max_tokens)
        reply = self.behaviour.output_tokens
        outputs = Range(
            expected=(debate.expected + other.expected) * reply + prefilter_calls.expected,
            low=(debate.low + other.low) * min(reply, max_out) + prefilter_calls.low,
            high=(debate.high + other.high) * max_out + prefilter_calls.high * max_out,
        )
        return ItemEstimate(
            claims=work.claims,
            calls=debate + other + prefilter_calls,
            input_tokens=inputs,
            output_tokens=outputs,
            debate_calls=debate,
            debate_input_tokens=debate.scaled(turn_in),
            debate_output_tokens=Range(
                expected=debate.expected * reply, low=debate.low * min(reply, max_out), high=debate.high * max_out
            ),
        )


def _per_item(items: Sequence[tuple[Task, TaskInput]], debate: _Debate, notes: set[str]) -> list[ItemEstimate]:
    config = debate.config
    per_item = []
    for task, item in items:
        work = task_work(task, item, config, notes)
        per_item.append(debate.item(work, prefilter_calls(work.claims, config, notes)))
    scripts = sorted({language for _, item in items if (language := guess_language(item.response)) != "en"})
    if scripts:
        notes.add(
            f"some responses are not in Latin script ({', '.join(scripts)}): a token covers fewer characters "
            "there than the 4 assumed, so their token counts are underestimated"
        )
    return per_item


def estimate(
    items: Sequence[tuple[Task, TaskInput]],
    *,
    config: VerifierConfig,
    chain: MarkovChain,
    prompts: dict[str, PromptTemplate],
    behaviour: Behaviour,
    price: Price | None,
    prices: Mapping[str, Price | None] | None = None,
) -> Estimate:
    """The run's expected calls, tokens and cost (see the module's docstring for how each is reached). `prices`:
    each model of the team by its planned name (debate.pipeline.planned_models); None: `price` for every model."""
    teams = teams_plan(config, chain)
    notes: set[str] = set(teams.notes(config))
    first_skipped = teams.first_skipped
    turns = _first_turns(config, chain, behaviour, notes, first_skipped)
    debate = _Debate(chain, prompts, behaviour, turns, config)
    per_item = _per_item(items, debate, notes)
    calls = sum((e.calls for e in per_item), ZERO)
    inputs = sum((e.input_tokens for e in per_item), ZERO)
    outputs = sum((e.output_tokens for e in per_item), ZERO)
    debate_parts = [sum((getattr(e, f) for e in per_item), ZERO) for f in _DEBATE_PARTS]
    shares, team = teams.shares(config, chain), (config, chain)
    models, (calls, inputs, outputs) = run_models(
        *team, (debate_parts, [calls, inputs, outputs]), turns, prices, price, shares, first_skipped
    )
    notes.update([CASCADE_NOTE] if shares and teams.voi is None else [])
    # The most one item may cost: each part at its largest over the items (an item no smaller than any), every
    # claim to the rounds' limit, escalated through every team; what --max-cost reserves for an item in flight.
    largest = [Range(expected=0, low=0, high=max((getattr(e, f).high for e in per_item), default=0.0)) for f in _ALL]
    item_most = most_cost(run_models(*team, (largest[3:], largest[:3]), turns, prices, price, shares, first_skipped)[0])
    notes.update([_SPLIT_NOTE] if len(models) > 1 else [])
    unpriced = [m for m in models if m.cost_usd is None and m.calls.high > 0]
    notes.update(f"no price known for model {m.name} ({', '.join(m.roles)})" for m in unpriced if m is not models[0])
    cost = None if unpriced else sum((m.cost_usd for m in models if m.cost_usd is not None), ZERO)
    return Estimate(
        models=models,
        stop=describe_stop(config.debate),
        items=len(items),
        claims=sum(e.claims for e in per_item),
        turns_per_claim=teams.turns_said(turns),
        calls_per_claim=debate.calls_per_claim,
        calls=calls,
        input_tokens=inputs,
        output_tokens=outputs,
        cost_usd=cost,
        price=price,
        behaviour=behaviour.source,
        notes=sorted(notes),
        item_cost_most=item_most,
    )


def _first_turns(
    config: VerifierConfig, chain: MarkovChain, behaviour: Behaviour, notes: set[str], skipped: bool
) -> Range:
    """The run's own team's turns per claim: under its stop's calibration, or the paper's rule under `behaviour`;
    one turn when it speaks none (`skipped`: the debate's parts are then one turn's, what the later teams' turns
    scale)."""
    d = config.debate
    if skipped:
        return Range(expected=1.0, low=1.0, high=1.0)
    if d.threshold is not None:
        assert d.calibration is not None  # the config's validator pairs them
        notes.add(
            f"turns under --debate.stop {d.stop} are expected under the calibration's fitted behaviour "
            "(--estimate-from and --agreement do not apply to them)"
        )
        return governed(d.calibration, d.prior, chain, d.threshold, d.max_rounds)[0]
    return debate_turns(behaviour, chain, d.min_rounds, d.max_rounds)
