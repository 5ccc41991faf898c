"""What the debate records: each agent's opinion, the call behind it, each state visited and the whole chain."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Self

from pydantic import Field, model_validator

from debate.types._core import Failure, Usage, _Model
from debate.types._names import ClaimLabel, Role, StateName, StopReason

__all__ = ["CallInfo", "DebateResult", "Opinion", "SentMessage", "StateRecord", "TeamPart", "Turn", "turns_by_model"]


class Opinion(_Model):
    """An agent's judgment of a claim, in the paper's reply format."""

    opinion: str = Field(min_length=1)
    """The agent's reasoning."""
    factuality: bool
    """True when the agent judges the claim factual."""
    error_severity: int = Field(ge=0, le=5)
    """0 (no error) to 5 (severe error), the paper's rubric."""
    enough_evidence: bool = True
    """False when the agent says the evidence can neither support nor refute the claim (the reply's optional
    `"enough evidence": false`, asked for by the `refchecker` prompt set only)."""

    @property
    def label(self) -> ClaimLabel:
        if not self.enough_evidence:
            return "not_enough_evidence"
        return "factual" if self.factuality else "non_factual"


class SentMessage(_Model):
    """One message of a turn's exchange with the model, as sent (or received)."""

    role: Literal["system", "user", "assistant"]
    """Who says it."""
    content: str
    """The exact text."""


class CallInfo(_Model):
    """Metadata of the model call(s) behind one turn."""

    prompt: str
    """Prompt file name."""
    prompt_hash: str
    """sha256 of the prompt file."""
    attempts: int = Field(ge=1)
    """Replies requested, counting re-asks after unparseable replies."""
    parse_errors: list[str] = Field(default_factory=list)
    """Why earlier replies were rejected."""
    usage: Usage = Field(default_factory=Usage)
    """Usage of this turn, re-asks included."""
    latency_s: float = Field(default=0.0, ge=0)
    """Wall time of the model calls."""
    finish_reason: str | None = None
    """Finish reason of the last reply."""
    model: str | None = None
    """The model that answered, named as the run's usage names it (a team may have a model per role); None: no
    reply came (or a report made before turns named their model)."""
    messages: list[SentMessage] | None = None
    """The exact exchange (system, user, replies, re-asks) when `DebateConfig.record_prompts` is on."""


class Turn(_Model):
    """One agent speaking once. A failed turn has `error` set and no opinion."""

    role: Role
    """Which agent spoke."""
    factuality: bool | None = None
    """The agent's verdict."""
    error_severity: int | None = Field(default=None, ge=0, le=5)
    """The agent's 0-5 severity."""
    opinion: str | None = None
    """The agent's reasoning."""
    enough_evidence: bool = True
    """False when the agent said the evidence cannot decide the claim."""
    error: str | None = None
    """Why the turn produced no usable opinion."""
    failure: Failure | None = None
    """The typed failure behind `error`."""
    call: CallInfo
    """Model call metadata."""

    @model_validator(mode="after")
    def _opinion_xor_error(self) -> Self:
        has_opinion = self.factuality is not None and self.error_severity is not None and self.opinion is not None
        if has_opinion == (self.error is not None):
            raise ValueError("a turn has either a complete opinion or an error")
        if (self.error is None) != (self.failure is None):
            raise ValueError("a failed turn has both `error` and `failure`")
        return self

    @classmethod
    def failed(cls, role: Role, failure: Failure, call: CallInfo) -> Turn:
        return cls(role=role, error=failure.message, failure=failure, call=call)

    @classmethod
    def from_opinion(cls, role: Role, opinion: Opinion, call: CallInfo) -> Turn:
        return cls(
            role=role,
            factuality=opinion.factuality,
            error_severity=opinion.error_severity,
            opinion=opinion.opinion,
            enough_evidence=opinion.enough_evidence,
            call=call,
        )

    def as_opinion(self) -> Opinion | None:
        if self.error is not None or self.factuality is None or self.error_severity is None or self.opinion is None:
            return None
        return Opinion(
            opinion=self.opinion,
            factuality=self.factuality,
            error_severity=self.error_severity,
            enough_evidence=self.enough_evidence,
        )


class StateRecord(_Model):
    """One visit of the chain to a state: S0 once, then one debate round per visit."""

    name: StateName
    """S0 (initial), S1 (trust first) or S2 (skeptic first)."""
    round: int = Field(ge=0)
    """0 for S0, k for debate round k."""
    turns: list[Turn]
    """Turns in speaking order."""
    consensus: bool | None = None
    """Whether all turns agreed on factuality (None when a turn failed)."""


def turns_by_model(turns: Iterable[Turn]) -> dict[str, Usage]:
    """The usage of `turns` by the model that answered each (turns that got no reply name none and are left out)."""
    by_model: dict[str, Usage] = {}
    for turn in turns:
        if turn.call.model is not None:
            by_model[turn.call.model] = by_model.get(turn.call.model, Usage()) + turn.call.usage
    return by_model


class TeamPart(_Model):
    """One team's part of a cascade's debate (`stop = "cascade:P"`)."""

    name: str
    """The team (`first`: the run's own; else its `[[debate.cascade]]` name)."""
    first_turn: int = Field(ge=0)
    """Its first turn, counted over the whole debate from 0 (S0's)."""
    turns: int = Field(ge=0)
    """Turns it spoke."""
    usage: Usage = Field(default_factory=Usage)
    """Its turns' usage."""
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)
    """The same by model (its roles may run on several)."""
    p_factual: float | None = Field(default=None, ge=0, le=1)
    """P(factual) after its turns, under its calibration (continuing the earlier teams')."""
    decided: bool = False
    """Its turns took p_factual past the threshold (or its last turn failed): no later team was asked."""
    calibrated: bool | None = None
    """Whether the calibration that read its turns is calibrated (None: in reports made before it was kept)."""
    warning: str | None = None
    """That calibration's warning (failed checks, a forced team, what it assumes), when it has one."""
    out_of_reach: str | None = None
    """Why the team stopped before its rounds ran out, or spoke no turn: from where it stood, no run of its turns
    could take p_factual to the threshold (the range they could reach); None: it was not stopped so."""


class TurnChoice(_Model):
    """Why the voi stop (`stop = "voi:P"`) gave the next turn to a team, or stopped."""

    turn: int = Field(ge=0)
    """The turn it chose (counted over the debate from 0), or, when it stopped, the turns taken."""
    team: str | None
    """The team that speaks it (None: the debate stopped)."""
    role: str | None = None
    p_factual: float | None = Field(default=None, ge=0, le=1)
    """The stop's P(factual) before it (None: before any turn, at the prior)."""
    error: float = Field(ge=0, le=0.5)
    """The decision's error then: min(p, 1 - p)."""
    expected_error: float | None = Field(default=None, ge=0, le=0.5)
    """The chosen team's expected error after its lookahead."""
    depth: int | None = Field(default=None, ge=1)
    """The lookahead (turns) its worth was best at."""
    cost: float | None = Field(default=None, ge=0)
    """That lookahead's expected cost, in `unit`."""
    unit: Literal["usd", "calls"] = "usd"
    """usd: each turn at its model's price and the run's tokens per turn; calls: a model has no price."""
    why: str
    """In words: its worth per unit of cost, and each team passed over with its worth or why it could not speak."""


class DebateResult(_Model):
    """The whole chain run for one claim."""

    rounds: int = Field(ge=0)
    """Debate rounds run (S0 not counted)."""
    consensus: bool | None
    """Whether the last debate round agreed; None when no round ran or it failed."""
    stop_reason: StopReason
    """Why the chain stopped."""
    states: list[StateRecord]
    """Every state visited, in order."""
    final: Opinion | None
    """The last Leader's opinion (S0's when no round ran); None when the debate failed."""
    failure: Failure | None = None
    """Why the debate could not finish."""
    usage: Usage = Field(default_factory=Usage)
    """Usage of all turns."""
    teams: list[TeamPart] = Field(default_factory=list)
    """Under the cascade stop: each team that spoke, in order (the last decided, or the list ended); under the voi
    stop, each run of turns one team spoke, in order; empty otherwise."""
    choices: list[TurnChoice] = Field(default_factory=list)
    """Under the voi stop: why each turn went to its team, and why the debate stopped (the last)."""
