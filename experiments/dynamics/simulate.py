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
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from debate.concurrency import gather_ordered
from debate.config import DebateConfig, ModelConfig, VerifierConfig
from debate.errors import InputError, UsageError, validation_problem
from debate.files import read_toml_file
from debate.llm import ChatRequest, ChatResponse, current_item
from debate.plugins import TaskInput
from debate.types import DebateResult, Report, Usage

if TYPE_CHECKING:
    from debate.engine import MarkovChain
from experiments.dynamics.predict import Setting, outcome

__all__ = [
    "ClassView",
    "DifficultyClass",
    "Final",
    "Population",
    "RoleParameters",
    "SimulatedAgents",
    "exact_accuracy",
    "finals",
    "labels_for",
    "load_population",
    "observed",
    "observed_finals",
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
    states: dict[str, RoleParameters] = Field(default_factory=dict)
    """Per state, the parameters that differ there (the rest as above): a role whose behaviour depends on the
    state."""

    @model_validator(mode="after")
    def _shares(self) -> RoleParameters:
        if self.memory + self.conformity > 1:
            raise ValueError(f"memory + conformity is {self.memory + self.conformity:g}: at most 1")
        return self

    def merged(self, other: RoleParameters) -> RoleParameters:
        """These parameters with the ones `other` sets replacing them."""
        return self.model_copy(update={k: getattr(other, k) for k in other.model_fields_set if k != "states"})

    def in_state(self, state: str) -> RoleParameters:
        return self.merged(self.states[state]) if state in self.states else self


class DifficultyClass(BaseModel):
    """A share of the items on which the roles decide differently (easy items, hard items)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    share: float = Field(gt=0, le=1)
    """The share of items in this class."""
    factual_true: float | None = Field(default=None, ge=0, le=1)
    """Every role's own P(verdict true) for a factual item of this class (a role's table below wins)."""
    hallucinated_true: float | None = Field(default=None, ge=0, le=1)
    """Every role's own P(verdict true) for a hallucinated item of this class."""
    roles: dict[str, RoleParameters] = Field(default_factory=dict)
    """Per role, the parameters that differ on this class's items."""

    def apply(self, name: str, params: RoleParameters) -> RoleParameters:
        """A role's parameters on this class's items."""
        shared = {k: getattr(self, k) for k in ("factual_true", "hallucinated_true") if getattr(self, k) is not None}
        params = params.model_copy(update=shared)
        if name not in self.roles:
            return params
        override = self.roles[name]
        return params.merged(override).model_copy(update={"states": {**params.states, **override.states}})


class Population(BaseModel):
    """Every role's parameters (roles not named decide on their own with the defaults), and optionally classes of
    items of unequal difficulty."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    roles: dict[str, RoleParameters] = Field(default_factory=dict)
    classes: list[DifficultyClass] = Field(default_factory=list)
    """Classes of items; their shares add up to 1. Empty: every item is alike."""
    seed: int = 0
    class_seed: str | None = None
    """None: an item's class follows its id alone, so every population agrees on which items are hard (one model's
    blind spots are another's). A text: drawn with it too, so two populations with different class seeds find
    different items hard (two model families' blind spots, independent)."""

    @model_validator(mode="after")
    def _add_up(self) -> Population:
        if self.classes and abs(sum(c.share for c in self.classes) - 1) > 1e-9:
            raise ValueError(f"classes: the shares add up to {sum(c.share for c in self.classes):g}, not 1")
        return self

    @property
    def markov(self) -> bool:
        """Whether every role decides on the last opinions it is shown only (no memory)."""
        params = [*self.roles.values(), *(r for c in self.classes for r in c.roles.values())]
        return all(p.memory == 0 and all(s.memory == 0 for s in p.states.values()) for p in params)

    def class_of(self, item: str) -> int | None:
        """The item's difficulty class: fixed by its id alone, so every run on the same items agrees."""
        if not self.classes:
            return None
        key = f"class:{item}" if self.class_seed is None else f"class:{self.class_seed}:{item}"
        u, total = random.Random(key).random(), 0.0
        for k, c in enumerate(self.classes):
            total += c.share
            if u < total:
                return k
        return len(self.classes) - 1

    def role(self, name: str, state: str | None = None, klass: int | None = None) -> RoleParameters:
        params = self.roles.get(name, RoleParameters())
        if klass is not None:
            params = self.classes[klass].apply(name, params)
        return params.in_state(state) if state is not None else params

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...], klass: int | None = None) -> float:
        """The exact P(verdict true) of a Markov population (memory 0) in a context, on a class's items."""
        r = self.role(role, state, klass)
        own = r.factual_true if label else r.hallucinated_true
        return r.conformity * shown[-1] + (1 - r.conformity) * own if shown else own

    def components(self) -> list[tuple[float, ClassView]]:
        """(share, the population on that class's items) for each class: a mixture's exact outcome is theirs,
        weighted."""
        if not self.classes:
            return [(1.0, ClassView(self, None))]
        return [(c.share, ClassView(self, k)) for k, c in enumerate(self.classes)]

    def decide(
        self,
        role: str,
        state: str,
        label: bool,
        shown: tuple[bool, ...],
        earlier: bool | None,
        u: float,
        klass: int | None = None,
    ) -> bool:
        """One verdict, from a uniform draw `u`."""
        r = self.role(role, state, klass)
        if earlier is not None and u < r.memory:
            return earlier
        if shown and u < r.memory + r.conformity:
            return shown[-1]
        scaled = (u - r.memory - r.conformity) / max(1e-12, 1 - r.memory - r.conformity) if shown else u
        return scaled < (r.factual_true if label else r.hallucinated_true)


@dataclass(frozen=True)
class ClassView:
    """The population on one class's items, as a role model (`p`)."""

    population: Population
    klass: int | None

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        return self.population.p(role, state, label, shown, self.klass)


def load_population(path: Path) -> Population:
    """A roles file: `seed = 1` and `[roles.trust] conformity = 0.6 ...` per role."""
    try:
        return Population.model_validate(read_toml_file(path, "roles file"))
    except InputError as exc:
        raise UsageError(str(exc)) from exc
    except ValidationError as exc:
        raise UsageError(f"{path}: {validation_problem(exc)}") from exc


class SimulatedAgents:
    """A ChatClient whose every debate turn is the population's draw."""

    def __init__(
        self,
        population: Population,
        chain: MarkovChain,
        labels: Mapping[str, bool],
        *,
        explain: bool = False,
        name: str = "simulated",
        said: dict[tuple[str, str], list[bool]] | None = None,
    ) -> None:
        """`name`: the model it answers as; `said`: the verdicts given so far per (item, claim), shared with the
        other populations of a team with a model per role, so each sees every turn of a debate it takes part in."""
        self._explain = explain
        self._population = population
        self._chain = chain
        self._labels = labels
        self._name = name
        self._said: dict[tuple[str, str], list[bool]] = defaultdict(list) if said is None else said

    @property
    def model_name(self) -> str:
        return self._name

    def answer(self, purpose: str, site: str | None, item: str | None) -> bool:
        """The verdict for one turn, from what the request declares."""
        if not purpose.startswith("debate:") or site is None or item is None or item not in self._labels:
            raise UsageError(f"the simulated population answers debate turns of its own items only (got {purpose})")
        role, (claim, state) = purpose.split(":", 1)[1], site.split(":")[:2]
        said = self._said.setdefault((item, claim), [])
        position, sees = self._chain.roles(state).index(role), self._chain.spec.role(role).sees
        if sees == "nothing" or not said:
            shown: tuple[bool, ...] = ()
        else:
            shown = tuple(said[-1:] if position == 0 or sees == "previous" else said[-position:])
        earlier = said[-len(shown) - 1] if shown and len(said) > len(shown) else None
        u = random.Random(f"{self._population.seed}:{item}:{site}").random()
        population = self._population
        verdict = population.decide(role, state, self._labels[item], shown, earlier, u, population.class_of(item))
        said.append(verdict)
        return verdict

    def opinion(self, role: str, verdict: bool, state: str | None = None, item: str | None = None) -> str:
        """What a simulated turn says: how its verdict was drawn, never an argument no one made."""
        if not self._explain:
            return "simulated"
        r = self._population.role(role, state, self._population.class_of(item) if item is not None else None)
        return (
            f"[simulated {role}] says {str(verdict).lower()}: drawn at its stated rates (true for "
            f"{r.factual_true:.0%} of factual and {r.hallucinated_true:.0%} of wrong claims; repeats the opinion "
            f"it is shown {r.conformity:.0%} of the time)"
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        item = current_item()
        verdict = self.answer(request.purpose, request.site, item)  # refuses a request without a site
        role, state = request.purpose.split(":", 1)[-1], str(request.site).split(":")[1]
        text = json.dumps(
            {
                "opinion": self.opinion(role, verdict, state, item),
                "factuality": verdict,
                "Error severity": 0 if verdict else 3,
            }
        )
        return ChatResponse(text=text, usage=Usage(llm_calls=1), model=self._name, latency_s=0.0, finish_reason="stop")

    async def accept(self, response: ChatResponse) -> None:
        """Nothing is cached."""

    async def aclose(self) -> None:
        """Nothing to close."""


def labels_for(n: int, share_true: float, seed: int, prefix: str = "sim") -> dict[str, bool]:
    """`n` simulated claims, round(n * share_true) of them factual, in a seeded order (ids `prefix`-i: an item's
    difficulty class follows its id, so another prefix is other items)."""
    truths = [i < round(n * share_true) for i in range(n)]
    random.Random(seed).shuffle(truths)
    return {f"{prefix}-{i}": t for i, t in enumerate(truths)}


async def simulated_reports(
    population: Population,
    *,
    chain: str,
    min_rounds: int,
    max_rounds: int,
    labels: Mapping[str, bool],
    model: ModelConfig | None = None,
    concurrency: int = 16,
    governed: Mapping[str, object] | None = None,
    roles: Mapping[str, object] | None = None,
) -> list[Report]:
    """Each labelled claim verified by the real engine (QA task, one claim per item) against the population: in
    process, or at the endpoint `model` names (`governed`: calibration, stop and force_calibration, as
    DebateConfig's; `roles`: each role's model on another endpoint, as VerifierConfig's)."""
    config = VerifierConfig(
        debate=DebateConfig(chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, **(governed or {})),
        **({"model": model} if model is not None else {}),
        **({"roles": roles} if roles else {}),
    )
    from debate.engine import load_chain
    from debate.pipeline import Verifier

    client = None if model is not None else SimulatedAgents(population, load_chain(chain), labels)
    async with Verifier(config=config, client=client) as verifier:

        async def one(item: str) -> Report:
            return await verifier.verify(
                TaskInput("an answer", question="a question", reference="some knowledge", id=item), task="qa"
            )

        return await gather_ordered(list(labels), one, limit=concurrency)


async def simulate_debates(
    population: Population, *, chain: str, min_rounds: int, max_rounds: int, labels: Mapping[str, bool]
) -> list[tuple[str, bool, DebateResult]]:
    """(item, true label, its debate) for each labelled claim, debated in process."""
    reports = await simulated_reports(
        population, chain=chain, min_rounds=min_rounds, max_rounds=max_rounds, labels=labels
    )
    results = []
    for item, report in zip(labels, reports, strict=True):
        debate = report.claims[0].debate if report.claims else None
        if debate is None:
            raise UsageError(f"{item}: the claim was not debated ({report.note})")
        results.append((item, labels[item], debate))
    return results


Final = tuple[bool, bool, int]
"""A finished debate: (the claim's label, the final verdict, model calls)."""


def finals(results: Sequence[tuple[str, bool, DebateResult]]) -> list[Final]:
    """Each debate that reached a verdict: what `observed` reads of it."""
    return [(label, r.final.factuality, r.usage.llm_calls) for _, label, r in results if r.final is not None]


def observed(results: Sequence[tuple[str, bool, DebateResult]]) -> tuple[float, float, float]:
    """(P(final true | factual), P(final true | hallucinated), mean model calls per claim)."""
    return observed_finals(finals(results))


def observed_finals(done: Sequence[Final]) -> tuple[float, float, float]:
    """As `observed`, from the debates' `finals` (a recorded run keeps those)."""
    yes = [v for label, v, _ in done if label]
    no = [v for label, v, _ in done if not label]
    return sum(yes) / max(1, len(yes)), sum(no) / max(1, len(no)), sum(c for *_, c in done) / max(1, len(done))


def exact_accuracy(population: Population, setting: Setting, share_true: float = 0.5) -> float:
    """The true accuracy of a Markov population (or a mixture of Markov classes) at a setting, computed exactly."""
    if not population.markov:
        raise ValueError("a population with memory has no exact accuracy here: simulate a large run instead")
    from debate.engine import load_chain

    chain, total = load_chain(setting.chain), 0.0
    for share, component in population.components():
        yes, no = (
            outcome(component, chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds, label=label).p_true
            for label in (True, False)
        )
        total += share * (share_true * yes + (1 - share_true) * (1 - no))
    return total
