"""A simulated agent population: each role answers from its behaviour parameters, seeded, so the whole engine (not
a re-implementation of it) produces transcripts whose true dynamics are known.

The population answers as a ChatClient (`SimulatedAgents`, in process) and behind a 127.0.0.1 endpoint
(`debate dynamics simulate`). It reads nothing from a prompt: the role from the request's purpose, the state from its
site, the claim's true label from the item it is made for, and what the role was shown from its own earlier answers
on that claim.
"""

from __future__ import annotations

import json
import random
import tomllib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from debate import DebateConfig, ModelConfig, Verifier, VerifierConfig
from debate.chain import MarkovChain, load_chain
from debate.concurrency import gather_ordered
from debate.errors import UsageError, validation_problem
from debate.llm import ChatRequest, ChatResponse, current_item
from debate.types import DebateResult, Report, Usage

__all__ = [
    "Population",
    "RoleParameters",
    "SimulatedAgents",
    "labels_for",
    "load_population",
    "observed",
    "simulate_debates",
    "simulated_reports",
]


class RoleParameters(BaseModel):
    """How one role decides."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    factual_true: float = Field(default=0.8, ge=0, le=1)
    """On its own, P(verdict true) for a factual claim."""
    hallucinated_true: float = Field(default=0.2, ge=0, le=1)
    """On its own, P(verdict true) for a hallucinated claim."""
    conformity: float = Field(default=0.0, ge=0, le=1)
    """P(repeating the last opinion it is shown) instead of deciding on its own."""
    memory: float = Field(default=0.0, ge=0, le=1)
    """P(repeating the opinion before the ones it is shown): above 0 the population is not Markov."""


class Population(BaseModel):
    """Every role's parameters (roles not named decide on their own with the defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    roles: dict[str, RoleParameters] = Field(default_factory=dict)
    seed: int = 0

    def role(self, name: str) -> RoleParameters:
        return self.roles.get(name, RoleParameters())

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        """The exact P(verdict true) of a Markov population (memory 0) in a context."""
        r = self.role(role)
        own = r.factual_true if label else r.hallucinated_true
        return r.conformity * shown[-1] + (1 - r.conformity) * own if shown else own

    def decide(self, role: str, label: bool, shown: tuple[bool, ...], earlier: bool | None, u: float) -> bool:
        """One verdict, from a uniform draw `u`."""
        r = self.role(role)
        if earlier is not None and u < r.memory:
            return earlier
        if shown and u < r.memory + r.conformity:
            return shown[-1]
        scaled = (u - r.memory - r.conformity) / max(1e-12, 1 - r.memory - r.conformity) if shown else u
        return scaled < (r.factual_true if label else r.hallucinated_true)


def load_population(path: Path) -> Population:
    """A roles file: `seed = 1` and `[roles.trust] conformity = 0.6 ...` per role."""
    try:
        return Population.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        raise UsageError(f"{path}: {validation_problem(exc)}") from exc


class SimulatedAgents:
    """A ChatClient whose every debate turn is the population's draw."""

    def __init__(self, population: Population, chain: MarkovChain, labels: Mapping[str, bool], *,
                 explain: bool = False) -> None:  # fmt: skip
        self._explain = explain
        self._population = population
        self._chain = chain
        self._labels = labels
        self._said: dict[tuple[str, str], list[bool]] = defaultdict(list)

    @property
    def model_name(self) -> str:
        return "simulated"

    def answer(self, purpose: str, site: str | None, item: str | None) -> bool:
        """The verdict for one turn, from what the request declares."""
        if not purpose.startswith("debate:") or site is None or item is None or item not in self._labels:
            raise UsageError(f"the simulated population answers debate turns of its own items only (got {purpose})")
        role, (claim, state) = purpose.split(":", 1)[1], site.split(":")[:2]
        said = self._said[(item, claim)]
        position, sees = self._chain.roles(state).index(role), self._chain.spec.role(role).sees
        if sees == "nothing" or not said:
            shown: tuple[bool, ...] = ()
        else:
            shown = tuple(said[-1:] if position == 0 or sees == "previous" else said[-position:])
        earlier = said[-len(shown) - 1] if shown and len(said) > len(shown) else None
        u = random.Random(f"{self._population.seed}:{item}:{site}").random()
        verdict = self._population.decide(role, self._labels[item], shown, earlier, u)
        said.append(verdict)
        return verdict

    def opinion(self, role: str, verdict: bool) -> str:
        """What a simulated turn says: how its verdict was drawn, never an argument no one made."""
        if not self._explain:
            return "simulated"
        r = self._population.role(role)
        return (f"[simulated {role}] says {str(verdict).lower()}: drawn at its stated rates (true for "
                f"{r.factual_true:.0%} of factual and {r.hallucinated_true:.0%} of wrong claims; repeats the opinion "
                f"it is shown {r.conformity:.0%} of the time)")  # fmt: skip

    async def complete(self, request: ChatRequest) -> ChatResponse:
        verdict = self.answer(request.purpose, request.site, current_item())
        role = request.purpose.split(":", 1)[-1]
        text = json.dumps({"opinion": self.opinion(role, verdict), "factuality": verdict,
                           "Error severity": 0 if verdict else 3})  # fmt: skip
        return ChatResponse(text=text, usage=Usage(llm_calls=1), model="simulated", latency_s=0.0,
                            finish_reason="stop")  # fmt: skip

    async def accept(self, response: ChatResponse) -> None:
        """Nothing is cached."""

    async def aclose(self) -> None:
        """Nothing to close."""


def labels_for(n: int, share_true: float, seed: int) -> dict[str, bool]:
    """`n` simulated claims, round(n * share_true) of them factual, in a seeded order."""
    truths = [i < round(n * share_true) for i in range(n)]
    random.Random(seed).shuffle(truths)
    return {f"sim-{i}": t for i, t in enumerate(truths)}


async def simulated_reports(population: Population, *, chain: str, min_rounds: int, max_rounds: int,
                            labels: Mapping[str, bool], model: ModelConfig | None = None,
                            concurrency: int = 16) -> list[Report]:  # fmt: skip
    """Each labelled claim verified by the real engine (QA task, one claim per item) against the population: in
    process, or at the endpoint `model` names."""
    config = VerifierConfig(debate=DebateConfig(chain=chain, min_rounds=min_rounds, max_rounds=max_rounds),
                            **({"model": model} if model is not None else {}))  # fmt: skip
    client = None if model is not None else SimulatedAgents(population, load_chain(chain), labels)
    async with Verifier(config=config, client=client) as verifier:

        async def one(item: str) -> Report:
            return await verifier.verify("an answer", question="a question", reference="some knowledge", task="qa",
                                         item_id=item)  # fmt: skip

        return await gather_ordered(list(labels), one, limit=concurrency)


async def simulate_debates(population: Population, *, chain: str, min_rounds: int, max_rounds: int,
                           labels: Mapping[str, bool]) -> list[tuple[str, bool, DebateResult]]:  # fmt: skip
    """(item, true label, its debate) for each labelled claim, debated in process."""
    reports = await simulated_reports(population, chain=chain, min_rounds=min_rounds, max_rounds=max_rounds,
                                      labels=labels)  # fmt: skip
    results = []
    for item, report in zip(labels, reports, strict=True):
        debate = report.claims[0].debate if report.claims else None
        if debate is None:
            raise UsageError(f"{item}: the claim was not debated ({report.note})")
        results.append((item, labels[item], debate))
    return results


def observed(results: Sequence[tuple[str, bool, DebateResult]]) -> tuple[float, float, float]:
    """(P(final true | factual), P(final true | hallucinated), mean model calls per claim)."""
    finals = [(label, r.final.factuality, r.usage.llm_calls) for _, label, r in results if r.final is not None]
    yes = [v for label, v, _ in finals if label]
    no = [v for label, v, _ in finals if not label]
    return sum(yes) / max(1, len(yes)), sum(no) / max(1, len(no)), sum(c for *_, c in finals) / max(1, len(finals))
