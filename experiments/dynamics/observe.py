"""The turns of recorded debates as observations of each role's behaviour: who spoke, in which state, for which
true label, what it was shown, and what it said.

What a turn was shown is recomputed with the engine's own chain logic (`debate.engine.ChainDriver`), so the fit sees
exactly what the agent saw, for any chain spec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from debate.config import DebateConfig
from debate.errors import UsageError
from debate.types import DebateResult, ModelIdentity

if TYPE_CHECKING:
    from debate.engine import MarkovChain

__all__ = [
    "Observation",
    "RunObservations",
    "claim_digest",
    "claim_labels",
    "observations",
]


@dataclass(frozen=True)
class Observation:
    """One turn: the role's verdict in its context."""

    item: str
    """The item (bootstrap resamples items, not turns)."""
    label: bool | None
    """The claim's true label (True = factual; None: not labelled, the fit takes it as latent)."""
    role: str
    state: str
    shown: tuple[bool, ...]
    """The verdicts of the opinions it was shown, in order (empty for the initial agent)."""
    earlier: bool | None
    """The verdict just before the ones it was shown (None at the start): what the Markov check adds."""
    verdict: bool
    calls: int
    """Model calls the turn took (re-asks included)."""
    position: int
    """The turn's place in its debate (0: the initial agent)."""
    initial: bool | None
    """The debate's initial verdict when it lies outside what this turn was shown and the opinion before them (None
    otherwise): what the one-run heterogeneity check adds."""


def observations(result: DebateResult, chain: MarkovChain, *, item: str, label: bool | None) -> list[Observation]:
    """The usable turns of one debate, in order (a failed turn ends the chain, and the list)."""
    from debate.engine import ChainDriver, result_records

    driver, records, seen = ChainDriver(chain), result_records(result), []
    for i, record in enumerate(records):
        if record.turn.factuality is None:
            break
        plan = driver.next_turn(records[:i])
        if (plan.role, plan.state) != (record.turn.role, record.state):
            raise UsageError(
                f"item {item}: the transcript does not follow chain {chain.name!r} (turn {i} is {record.turn.role} in "
                f"{record.state}; the chain gives {plan.role} in {plan.state})"
            )
        shown = tuple(p.opinion.factuality for p in plan.previous)
        before = i - len(shown) - 1
        earlier = records[before].turn.factuality if shown and before >= 0 else None
        initial = records[0].turn.factuality if shown and before > 0 else None
        seen.append(
            Observation(
                item=item,
                label=label,
                role=record.turn.role,
                state=record.state,
                shown=shown,
                earlier=earlier,
                verdict=record.turn.factuality,
                calls=max(1, record.turn.call.usage.llm_calls),
                position=i,
                initial=initial,
            )
        )
    return seen


@dataclass(frozen=True)
class RunObservations:
    """A run folder's debates as observations, with the settings they were run at."""

    run_dir: Path | str
    """Where the debates were read: a run folder, a results log, or a desk's database URL (no password)."""
    chain: str
    min_rounds: int
    max_rounds: int
    observations: list[Observation]
    finals: dict[str, tuple[bool | None, bool, int]]
    """Per debated claim (item/claim id): (true label (None: not labelled), final verdict, model calls of its
    debate)."""
    debate: DebateConfig
    """The run's debate settings (its stop rule and calibration included)."""
    model: str
    """The model the run's reports name."""
    prompts: dict[str, str]
    """The debate's prompt files (name -> sha256) as the reports recorded them."""
    p_factual: dict[str, float]
    """Per debated claim with one, its p_factual (a run with a calibration)."""
    team: tuple[str, str]
    """The run's debate team and prompt set."""
    roles: dict[str, str] = field(default_factory=dict)
    """Each role whose turns ran on a model of its own, and that model (the reports' `meta.roles`)."""
    identities: dict[str, ModelIdentity] = field(default_factory=dict)
    """Each role and its model's identity, name and sampling settings (the reports' `meta.team`; empty in reports
    made before it was kept)."""
    digests: dict[str, str] = field(default_factory=dict)
    """Per debated claim, the sha256 of its text and its whole recorded debate (latencies included): the same
    debate given twice (a log and its desk export, a copied log) has the same digest, two debates of one claim
    text do not."""
    calibration_sha256: str | None = None
    """The sha256 of the calibration file the run's stop decided with, as its reports recorded it."""


def claim_digest(made: datetime, text: str, debate: DebateResult) -> str:
    """RunObservations.digests' value for one debated claim: when its report was made, its text, its debate. A
    copy of a report (a copied log, the desk's export of an audit) keeps all three; two reports never share the
    first, even where two simulated debates are alike to the letter."""
    shown = f"{made.astimezone(UTC).isoformat()}\0{text}\0{debate.model_dump_json()}"
    return hashlib.sha256(shown.encode("utf-8", "surrogatepass")).hexdigest()


def claim_labels(label: bool | None, claims: int) -> list[bool | None]:
    """Each of a response's `claims` labels from the response's: a factual response has only factual claims; a
    non-factual one says which claim is wrong only when it has one claim."""
    if label is None or (not label and claims != 1):
        return [None] * claims
    return [label] * claims
