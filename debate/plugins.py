"""The extension points: the pipeline's stages as small protocols, and one registry per stage.

    plan (Task) -> evidence (EvidenceSource) -> prefilters (Prefilter, in config order) -> debate (Team over a
    chain) -> rollup -> Report

The Verifier only orchestrates these; it names no task, prefilter, chain or rollup. Each registry loads its
implementations from the entry point group `markov_debate.<stage>`: the project's built-ins are entry points of its
own pyproject.toml, exactly as an installed plugin's are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from debate.config import DebateConfig, SearchConfig, VerifierConfig
from debate.errors import UsageError, validation_problem
from debate.registry import Registry, UnknownNameError
from debate.types import (
    ChainSpec,
    ChatClient,
    CitationVariant,
    Claim,
    ClaimVerdict,
    DebateResult,
    Evidence,
    ExtractionInfo,
    PrefilterDecision,
    ReportVerdict,
    ResponseCheck,
    Source,
    Usage,
)

__all__ = [
    "CHAINS",
    "PREFILTERS",
    "RESULT_STORES",
    "RETRIEVERS",
    "ROLLUPS",
    "SEARCH_BACKENDS",
    "TASKS",
    "TEAMS",
    "Chain",
    "EstimatesWork",
    "EvidenceCache",
    "EvidenceSource",
    "Plan",
    "Prefilter",
    "PrefilterFactory",
    "Reference",
    "Retriever",
    "Rollup",
    "RollupRule",
    "SearchBackend",
    "SearchHit",
    "StageContext",
    "Task",
    "TaskInput",
    "TaskWork",
    "Team",
    "TeamFactory",
    "check_config",
    "stage_options",
]

Reference = str | Sequence[Evidence] | Sequence[Source] | Mapping[str, str]
"""Knowledge text, a document, evidence items, or RAG sources ({id: text} or Source items)."""


@dataclass(frozen=True)
class TaskInput:
    """One response to verify, as the caller gave it."""

    response: str
    question: str | None = None
    reference: Reference | None = None
    reference_source: str | None = None
    """Where the reference came from (a file, a batch line), recorded on its evidence."""
    claims: Sequence[str] | None = None
    """Claims to verify instead of extracting them."""
    id: str | None = None
    """The caller's id for the item (a batch line's, an audit's): every model call made for it carries it."""


class EvidenceSource(Protocol):
    """Gives each claim its evidence. Raises a DebateError (e.g. EvidenceUnavailableError) when it cannot."""

    async def evidence(self, claim: Claim) -> tuple[list[Evidence], Usage]: ...


@dataclass(frozen=True)
class Plan:
    """What a task made of a response: its claims and where each claim's evidence comes from."""

    claims: list[Claim]
    extraction: ExtractionInfo
    evidence: EvidenceSource
    notes: list[str] = field(default_factory=list)
    sources: list[Source] | None = None
    """RAG sources, when the task has them (prefilters check citations against them)."""
    question: str | None = None
    """The question the response answers (the pipeline's copy of the plan carries it)."""
    citation_variant: CitationVariant = "seed"
    """How the response's citations are read (the task's choice, e.g. task_options.rag.citation_variant): the
    prefilters that check citations read them the same way."""


class EvidenceCache(Protocol):
    """Evidence lists by content key, shared by the stages of a run (debate.evidence.RetrievalCache: in memory, and
    on disk with retrieval.cache_dir)."""

    def get(self, key: str) -> list[Evidence] | None: ...

    def put(self, key: str, items: list[Evidence]) -> None: ...


class Chain(Protocol):
    """A validated Markov chain (debate.engine.MarkovChain, built from a ChainSpec): what a team debates over."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ChainSpec: ...

    def roles(self, state: str) -> tuple[str, ...]:
        """The speakers of `state`, in order."""
        ...

    def next_state(self, current: str, verdict: bool) -> str:
        """The state after `current` when its final verdict is `verdict`."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Its states, speakers and transitions as node and edge lists (the report's and the UI's drawing)."""
        ...


class StageContext(Protocol):
    """What stages may use: the model client, the configuration, and shared, lazily built resources."""

    @property
    def client(self) -> ChatClient: ...

    @property
    def config(self) -> VerifierConfig: ...

    @property
    def prompts_dir(self) -> str | None: ...

    @property
    def cache(self) -> EvidenceCache: ...

    def retriever(self) -> Retriever: ...

    def search_backend(self) -> SearchBackend | None: ...


@dataclass(frozen=True)
class TaskWork:
    """What a task expects one item to cost before its claims' debates (`debate verify --estimate`)."""

    claims: float
    """Claims it expects (exact when given or found by rule, else one per sentence up to claims.max_claims)."""
    calls: float = 0.0
    """Model calls per item before the debates (extraction, the subjective filter)."""
    input_chars: int = 0
    """Characters those calls send (prompt and text)."""
    claim_chars: float = 0.0
    """Characters of one claim."""
    evidence_chars: float = 0.0
    """Characters of one claim's evidence."""
    claim_calls: float = 0.0
    """Model calls per claim outside the debate (search queries)."""


@runtime_checkable
class EstimatesWork(Protocol):
    """A task that can say what an item will cost before running it (optional: a task without it is estimated
    as one extraction call and one claim per sentence)."""

    def expected_work(self, item: TaskInput, config: VerifierConfig) -> TaskWork: ...


class Task(Protocol):
    """A verification setting (qa, summarization, dialogue, ...): turns a response into a Plan."""

    name: str

    async def plan(self, item: TaskInput, ctx: StageContext) -> Plan:
        """Raise InputError for a malformed item; model and extraction failures as their DebateErrors."""
        ...


class Prefilter(Protocol):
    """A cheap check before the debate; `decision` factual/non_factual decides the claim without one."""

    name: str

    def prompt_hashes(self) -> dict[str, str]: ...

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        """Raise a DebateError when the check cannot run for a reason that is not the claim's (endpoint down)."""
        ...

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        """Once per response, before its claims (citation rules, an LLM judge). A high risk keeps every claim in
        the debate. Raise a DebateError when the check cannot run: the response then gets that failure."""
        ...

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        """Once per response, after its claims (e.g. the grounding block built from the claims' signals)."""
        ...

    def note(self) -> str | None:
        """Something the report should say about this prefilter (e.g. that it could not run)."""
        ...


PrefilterFactory = Callable[["StageContext"], Prefilter]


class Retriever(Protocol):
    """Scores candidate sentences against a query."""

    name: str

    def rank(self, query: str, sentences: Sequence[str], k: int) -> list[tuple[int, float]]:
        """Indices and scores of the `k` best sentences, best first (blocking; run it in a thread)."""
        ...


@dataclass(frozen=True)
class SearchHit:
    """One search result."""

    title: str
    snippet: str
    url: str


class SearchBackend(Protocol):
    """Answers a search query with hits (Serper, a local collection, or a plugin's)."""

    name: str

    async def search(self, query: str, k: int) -> list[SearchHit]:
        """Raise EvidenceUnavailableError when the backend fails."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Rollup:
    """A response-level verdict."""

    factual: bool | None
    verdict: ReportVerdict
    note: str | None = None


RollupRule = Callable[[Sequence[ClaimVerdict], Any], Rollup]
"""Claims and the rule's options (an instance of its `Options` model, from `rollup_options.<name>`; None for a rule
that declares none) -> the response's verdict."""


class Team(Protocol):
    """The agents of one claim's debate, run over a chain. A new team per claim: no agent state crosses claims."""

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        """The chain's transcript. Model failures end it as `failed` with a typed failure; a fatal endpoint error
        (every further call would fail the same way) is raised."""
        ...


class TeamFactory(Protocol):
    """Makes a fresh Team per claim and reports the prompt files it uses."""

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: Chain) -> Team: ...

    def prompt_hashes(self, chain: Chain) -> dict[str, str]: ...


TASKS: Registry[Callable[[], Task]] = Registry(
    "tasks",
    listed={
        "dialogue": "subjective filter, then claims; evidence: the knowledge, then the dialogue history (`question`).",
        "general": "open responses: claims vs. reference or search",
        "kbqa": "knowledge-based QA (FactPrompts): claims vs. reference or search",
        "qa": "question + answer form one claim (no model call); `reference` is the knowledge.",
        "rag": "cited sentences vs. the sources they cite.",
        "summarization": "claims of the summary vs. the top-k sentences of the source document (`reference`).",
    },
)
RETRIEVERS: Registry[Callable[[], Retriever]] = Registry(
    "retrievers",
    listed={
        "bm25": "lexical BM25 (bm25s, English stopwords)",
        "dense": "all-MiniLM-L6-v2 embeddings, cosine similarity (offline)",
    },
)
SEARCH_BACKENDS: Registry[Callable[[SearchConfig], SearchBackend]] = Registry(
    "search",
    listed={"local": "a JSONL collection of {title, text}, BM25", "serper": "a Serper-compatible HTTP search API"},
)
PREFILTERS: Registry[PrefilterFactory] = Registry(
    "prefilters",
    listed={
        "logprob": "logprob grounding; with trust_grounded, a strongly grounded claim is decided without a debate",
        "rag-judge": "the RAG citation rules, then an LLM judge unless the rules' score is above 0.6",
        "rules": "the RAG citation rules (task rag): an invalid citation raises the answer's risk",
    },
)
ROLLUPS: Registry[RollupRule] = Registry(
    "rollups",
    listed={
        "any-false": "the paper's rule: non-factual if any claim is",
        "major": "RefChecker's major: the most common claim label",
        "soft": "RefChecker's soft ratios; factual when the Entailment share reaches its threshold "
        "(rollup_options.soft.threshold, default 0.5)",
        "strict": "RefChecker's strict (= any-false under our labels)",
    },
)
TEAMS: Registry[Callable[..., TeamFactory]] = Registry("teams")
RESULT_STORES: Registry[Callable[[str], Iterable[str]]] = Registry("stores", listed={"desk": "the desk's database"})
"""Where `debate dynamics fit --db URL` reads finished reports (URL -> the lines of the desk's jsonl export)."""
"""The autogen team lives in agents/, which debate/ never imports."""
CHAINS: Registry[ChainSpec | Callable[[], ChainSpec]] = Registry(
    "chains",
    listed={
        "always-skeptic": "every round is S2 (Skeptic first)",
        "always-trust": "every round is S1 (Trust first)",
        "true-to-skeptic": "the paper's rule (Table 4): true -> S2 (Skeptic first), false -> S1",
        "true-to-trust": "true -> S1 (Trust first), false -> S2",
    },
)
"""Chain specs by name: the paper's four transition rules, and installed ones (a ChainSpec, or a zero-argument
callable returning one)."""


def stage_options(registry: Registry[Any], name: str) -> type[BaseModel] | None:
    """The options model the implementation registered as `name` declares (its `Options` class), or None when it
    takes none. Built-ins and plugins declare theirs the same way.

    Raises:
        UnknownNameError: nothing is registered as `name`.
    """
    model = getattr(registry.get(name), "Options", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _check_options(where: str, registry: Registry[Any], options: Mapping[str, Mapping[str, Any]]) -> None:
    what = registry.stage[:-1]
    for name, values in options.items():
        if name not in registry:
            raise UnknownNameError(f"{where}: {registry.unknown(name)}")
        model = stage_options(registry, name)
        if model is None:
            raise UsageError(f"{where}: {what} {name!r} takes no options (it declares no Options model)")
        try:
            model.model_validate(values)
        except ValidationError as exc:
            raise UsageError(f"{where}.{name}: {validation_problem(exc)}") from None


def check_config(config: VerifierConfig) -> None:
    """Check every name the configuration gives a stage against its registry (built-ins and installed plugins),
    and each prefilter's, task's and rollup's options against the model it declares. The Verifier calls it before it
    builds anything.

    Raises:
        UnknownNameError: a name nothing is registered under; the message names the field, the known names and the
            closest one.
        UsageError: options for a stage that declares none, or that do not fit its options model.
    """
    names: list[tuple[str, Registry[Any], str]] = [
        ("team", TEAMS, config.team),
        ("rollup", ROLLUPS, config.rollup),
        ("retrieval.retriever", RETRIEVERS, config.retrieval.retriever),
        *(("prefilter.prefilters", PREFILTERS, name) for name in config.prefilter.prefilters),
    ]
    if config.search is not None:
        names.append(("search.backend", SEARCH_BACKENDS, config.search.backend))
    chain = config.debate.chain
    if not (chain.lower().endswith((".toml", ".json", ".yaml", ".yml")) or "/" in chain):
        # A spec file is validated when it is loaded.
        names.append(("debate.chain", CHAINS, chain))
    for where, registry, name in names:
        if name not in registry:
            raise UnknownNameError(f"{where}: {registry.unknown(name)}")
    _check_options("prefilter.options", PREFILTERS, config.prefilter.options)
    _check_options("task_options", TASKS, config.task_options)
    _check_options("rollup_options", ROLLUPS, config.rollup_options)
