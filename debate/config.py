"""Configuration models. Every knob of an ablation lives here, so an ablation is a config change."""

from __future__ import annotations

import os
from typing import Any, Literal, Self, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)

from debate._migrations import upgrade_prefilter, upgrade_verifier
from debate.endpoints import (
    ENDPOINT_FIELDS,
    MAX_CONCURRENCY,
    MAX_SECONDS,
    Config,
    ModelConfig,
    RoleConfig,
    RoleModelConfig,
    StructuredOutputMode,
)
from debate.endpoints import header_safe as _header_safe
from debate.types import RollupName, StopSetting, parse_stop, stop_kind

__all__ = [
    "ENDPOINT_FIELDS",
    "MAX_CONCURRENCY",
    "MAX_SECONDS",
    "PROMPT_SETS",
    "CascadeTeam",
    "ClaimConfig",
    "DebateConfig",
    "ModelConfig",
    "PrefilterConfig",
    "RetrievalConfig",
    "RoleConfig",
    "RoleModelConfig",
    "SearchConfig",
    "StructuredOutputMode",
    "TelemetryConfig",
    "VerifierConfig",
]

PROMPT_SETS: tuple[str, ...] = ("paper", "tuned", "refchecker")
"""Packaged prompt sets: `paper` (default) carries the instructions of the paper's Tables 6-9 in our words (each
listed in the tests' conformance suite); `tuned` is the earlier, shorter set, a departure kept for comparison
(`debate ablate prompt-set`); `refchecker` is the paper set whose agents may also answer that the evidence cannot
decide a claim (RefChecker's Neutral)."""

MAX_ROUNDS = 100
"""The most debate rounds a chain may be given: past it the exact estimate and dynamics tables grow without use."""


_O = TypeVar("_O", bound=BaseModel)


class CascadeTeam(Config):
    """A team the cascade stop (`stop = "cascade:P"`) hands an undecided claim to: the same chain, continued by
    agents on other models, with the team's own calibration."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    """How reports name the team (the run's own team is `first`)."""
    model: RoleModelConfig = Field(default_factory=RoleModelConfig)
    """The model of every role of this team: the fields of `[model]`, each one not given taken from it."""
    roles: dict[str, RoleConfig] = Field(default_factory=dict)
    """A role's own model in this team, over the team's `model`."""
    calibration: str
    """This team's calibration file (`debate dynamics fit` on a run of this team): its p_factual decides."""
    max_rounds: int = Field(default=2, ge=1, le=MAX_ROUNDS)
    """Debate rounds this team may add to the turns so far before the claim goes to the next team."""

    def model_for(self, role: str, base: ModelConfig) -> ModelConfig:
        """The model role `role` runs on in this team, over the run's `[model]` as resolved (`base`)."""
        team = self.model.over(base)
        given = self.roles.get(role)
        return team if given is None else given.model.over(team)

    @field_serializer("roles")
    def _roles_given(self, value: dict[str, RoleConfig]) -> dict[str, Any]:
        return {role: {"model": given.model.model_dump(exclude_none=True)} for role, given in value.items()}

    @field_serializer("model")
    def _model_given(self, value: RoleModelConfig) -> dict[str, Any]:
        return value.model_dump(exclude_none=True)


class DebateConfig(Config):
    """The Markov chain's knobs (paper section 3.3)."""

    min_rounds: int = Field(default=2, ge=0, le=MAX_ROUNDS)
    """Debate rounds that always run before consensus may stop the chain; 0 makes S0 final."""
    max_rounds: int = Field(default=5, ge=0, le=MAX_ROUNDS)
    """Hard limit on debate rounds."""
    chain: str = Field(default="true-to-skeptic", validation_alias=AliasChoices("chain", "transition"))
    """A registered chain (`debate chains`; the paper's default true-to-skeptic: true -> S2, false -> S1) or a chain
    spec file (TOML)."""
    record_prompts: bool = Field(default=False, exclude=True)
    """Keep each turn's exact messages in the report (`CallInfo.messages`, for `--show-prompts`); larger reports.
    Not serialised: it changes what a report shows, not a verdict, so run digests and resumed runs ignore it."""
    max_parse_retries: int = Field(default=2, ge=0, le=5)
    """Re-asks after an unparseable agent reply before the claim is unverifiable."""
    calibration: str | None = None
    """A calibration file (`debate dynamics fit RUN --save FILE`): each debated claim then gets p_factual, P(factual |
    its debate's turns), and the response p_factual under its rollup. Fitted on another model, prompt set or chain,
    it is refused."""
    stop: StopSetting = "consensus"
    """consensus: the paper's rule (agreement after min_rounds, else max_rounds); posterior:P (P in (0.5, 1), needs
    `calibration`): after each turn the debate ends once p_factual >= P or <= 1 - P, else at max_rounds, and the
    verdict is the posterior's side; cascade:P: the same, then each `[[debate.cascade]]` team in turn takes what
    the earlier left undecided; voi:P (a named departure from the paper): before each turn, the team whose turn is
    expected to lower the decision's error most per dollar speaks it, until p_factual passes P or no team can take
    it there."""
    force_calibration: bool = False
    """Let the posterior stop use a calibration whose checks failed (its p_factual is not calibrated)."""
    cascade: list[CascadeTeam] = Field(default_factory=list)
    """The teams `stop = "cascade:P"` escalates to, in order (`[[debate.cascade]]`): a claim the run's team leaves
    undecided at max_rounds (p_factual between 1 - P and P) is continued by the next team from the turns so far,
    until a team decides it or the list ends. Under `stop = "voi:P"`, the teams the next turn is chosen among
    (with the run's own)."""
    force_calibration_team: bool = False
    """Use a calibration fitted on a team whose roles ran on other models: its p_factual then describes the fitted
    team's agents, so every verdict it scores says it is not calibrated, naming the role that differs."""
    prior: float | None = Field(default=None, gt=0, lt=1)
    """The share of factual claims in this traffic, where it differs from the calibration's fitted run: p_factual's
    odds scale by (prior / (1 - prior)) / (fitted / (1 - fitted)). None: the fitted share."""

    @model_validator(mode="after")
    def _rounds_ordered(self) -> Self:
        if self.min_rounds > self.max_rounds:
            raise ValueError(f"min_rounds ({self.min_rounds}) must not exceed max_rounds ({self.max_rounds})")
        return self

    @field_validator("calibration")
    @classmethod
    def _calibration_named(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("an empty path: give the calibration file `debate dynamics fit --save FILE` wrote")
        return value

    @model_validator(mode="after")
    def _prior_needs_calibration(self) -> Self:
        if self.prior is not None and self.calibration is None:
            raise ValueError("prior is the base rate of a calibration's p_factual: it needs a calibration file")
        return self

    @model_validator(mode="after")
    def _stop_needs_calibration(self) -> Self:
        if self.stop != "consensus" and self.calibration is None:
            raise ValueError(f"stop {self.stop} needs a calibration file (calibration, --debate.calibration FILE)")
        return self

    @model_validator(mode="after")
    def _cascade_named_both_ways(self) -> Self:
        kind = stop_kind(self.stop)
        if kind == "cascade" and not self.cascade:
            raise ValueError(f"stop {self.stop} needs the teams it escalates to ([[debate.cascade]])")
        if self.cascade and kind not in ("cascade", "voi"):
            raise ValueError('cascade teams are used by the cascade and voi stops only: set stop = "cascade:P"')
        names = [team.name for team in self.cascade]
        if "first" in names or len(set(names)) < len(names):
            raise ValueError(f"cascade team names must differ from each other and from `first`: {names}")
        return self

    @property
    def threshold(self) -> float | None:
        """The posterior stop's threshold; None under the paper's rule."""
        rule = parse_stop(self.stop)
        return None if rule == "consensus" else rule


class ClaimConfig(Config):
    """Claim extraction (summarization, dialogue, kbqa, general)."""

    format: Literal["sentence", "triplet"] = "sentence"
    """Atomic sentences (Factool) or RefChecker (subject, predicate, object) triplets."""
    max_claims: int | None = Field(default=None, ge=1, le=100_000)
    """Claims kept per response (extracted ones, RAG sentences); None (the default, as in the paper): no cap. When
    a cap cuts, the report's note says how many claims were dropped."""
    min_chars: int = Field(default=15, ge=0)
    """RAG answers: a sentence whose text (citations removed) is shorter than this is not a claim (the logprob
    grounding source's minimum claim length); the report's note counts the sentences skipped."""
    max_parse_retries: int = Field(default=2, ge=0, le=5)
    """Re-asks after an unusable extraction reply before the response is an error."""
    prompt: str | None = None
    """Extraction prompt. Default by format: sentence -> factool_claims (the paper extracts claims with Factool's
    method), triplet -> extract_triplets (RefChecker's). extract_claims is our own, a named departure."""


class RetrievalConfig(Config):
    """Top-k sentences of a given document per claim."""

    retriever: str = "dense"
    """Document retriever: dense (all-MiniLM-L6-v2 embeddings, offline), bm25 (bm25s), or a plugin's."""
    top_k: int = Field(default=10, ge=1, le=100_000)
    """Sentences per claim (paper: 10)."""
    cache_dir: str | None = None
    """Also keep retrieval results on disk, keyed by content hash."""


class SearchConfig(Config):
    """A search backend for claims with no reference (Factool-style query generation)."""

    backend: str
    """serper: a Serper-compatible HTTP API; local: a JSONL collection of {title, text} searched with BM25."""
    base_url: str = "https://google.serper.dev"
    """Serper-compatible endpoint."""
    api_key: SecretStr | None = Field(default=None, exclude=True)
    """Serper key (env SERPER_API_KEY); never written to reports."""
    collection: str | None = None
    """JSONL file for the local backend."""
    queries_per_claim: int = Field(default=2, ge=1, le=5)
    """Queries generated per claim (Factool: 2)."""
    results_per_query: int = Field(default=5, ge=1, le=10)
    """Evidence items kept per query (Factool: 5, so 10 per claim; an answer box alone when there is one)."""
    queries_prompt: str = "factool_queries"
    """Query-generation prompt: factool_queries (default: the paper retrieves evidence with Factool's queries) or
    queries (our own, a named departure)."""
    timeout_s: float = Field(default=20.0, gt=0, le=MAX_SECONDS)
    """Per-request timeout."""
    max_attempts: int = Field(default=4, ge=1, le=20)
    """HTTP attempts on transient errors."""
    dedupe: bool = False
    """Drop a snippet already found by an earlier query of the same claim (a named variant; Factool keeps both
    queries' snippets as they come)."""

    @field_validator("api_key")
    @classmethod
    def _header_safe_key(cls, value: SecretStr | None) -> SecretStr | None:
        return _header_safe(value)

    @model_validator(mode="after")
    def _backend_needs(self) -> Self:
        if self.backend == "local" and not self.collection:
            raise ValueError("the local search backend needs `collection` (a JSONL file of {title, text})")
        if self.backend == "serper" and self.api_key is None:
            raise ValueError("the serper search backend needs an API key (api_key, --search.api-key or SERPER_API_KEY)")
        return self


class PrefilterConfig(Config):
    """The cheap checks before the debate, and when they may decide a claim."""

    prefilters: list[str] = Field(default_factory=list)
    """Prefilters to run, in order (rules, logprob, or a plugin's); empty: none."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_layouts(cls, data: Any) -> Any:
        return upgrade_prefilter(data)

    options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each listed prefilter's own options, by its name (e.g. {"logprob": {"trust_grounded": true}}), checked
    against the options model the prefilter declares (its `Options` class), the built-ins' and a plugin's alike."""

    @field_validator("prefilters")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            # Named, not the whole list echoed back (a list of thousands would be the whole message).
            shown = ", ".join(repr(name[:60]) for name in twice[:5])
            raise ValueError(f"a prefilter is listed more than once: {shown}")
        return value

    @model_validator(mode="after")
    def _options_listed(self) -> Self:
        # Whether the options fit the prefilter's own model is checked where the prefilter is looked up
        # (debate.plugins.check_config), so configuration imports no stage.
        for name in self.options:
            if name not in self.prefilters:
                raise ValueError(f"options for prefilter {name!r}, which is not listed in prefilters")
        return self

    def options_for(self, name: str, model: type[_O]) -> _O:
        """Prefilter `name`'s options as its own model (its defaults when none are given)."""
        return model.model_validate(self.options.get(name, {}))


class TelemetryConfig(Config):
    """OpenTelemetry tracing (extra `otel`; see debate.telemetry)."""

    endpoint: str | None = None
    """OTLP/HTTP base URL (e.g. Phoenix's http://127.0.0.1:6006); None: OTEL_EXPORTER_OTLP_ENDPOINT if set, else
    tracing is off."""
    project: str = "markov-debate"
    """The Phoenix project (OpenInference resource attribute) the traces go to."""

    @field_validator("endpoint")
    @classmethod
    def _otlp_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"OTLP endpoint {value!r} is not an http(s) URL (the exporter speaks OTLP/HTTP)")
        return value


class VerifierConfig(Config):
    """Everything a Verifier needs."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """Endpoint and sampling."""
    debate: DebateConfig = Field(default_factory=DebateConfig)
    """Chain knobs."""
    team: str = "autogen"
    """Registered agent-team implementation."""
    prompt_set: str = "paper"
    """The agents' prompts: paper (the instructions of the paper's Tables 6-9 in our words, each listed in the
    conformance tests), tuned (our earlier short set, a departure), refchecker (paper + Neutral), or a directory
    of prompt files (missing files fall back to the paper set)."""
    claim_concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    """Claims of one response in progress at once (model calls are bounded by model.max_concurrency)."""
    claims: ClaimConfig = Field(default_factory=ClaimConfig)
    """Claim extraction."""
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    """Document retrieval."""
    search: SearchConfig | None = None
    """Search backend; None: claims without a reference are judged knowledge-free."""
    prefilter: PrefilterConfig = Field(default_factory=PrefilterConfig)
    """Cheap checks before the debate."""
    rollup: RollupName = "any-false"
    """Claims -> response rule."""
    rollup_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each rollup's own options, by its name (e.g. {"soft": {"threshold": 0.6}}), checked against the options
    model the rollup declares (its `Options` class) when the Verifier is built."""
    task_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each task's own options, by its name (e.g. {"rag": {"citation_variant": "occurrences"}}), checked against
    the options model the task declares (its `Options` class) when the Verifier is built."""
    localize: bool = False
    """RefChecker's evidence localization: for each element of a verified claim, the evidence sentence that matches
    it best (with the run's retriever), in the claim's `localized`. Off by default: in RefChecker it is a step of its
    own, after checking."""
    language: str | None = None
    """The responses' language (an ISO 639 code such as en, he, zh) for sentence splitting and for the language of
    the RAG grounding warnings (en or he); None: guessed from each text's dominant script (Latin is read as en)."""
    roles: dict[str, RoleConfig] = Field(default_factory=dict)
    """A model per role, by the role's name in the chain (initial, trust, skeptic, leader, or a chain file's own):
    `[roles.leader.model] model = "gpt-4o"`, `--roles leader.model.model=gpt-4o`. Every other model call (claims,
    queries, judges, the roles not named) goes to `[model]`."""
    call_cache: str | None = None
    """SQLite file caching model calls; a re-run with the same calls makes no endpoint calls."""
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    """Tracing to an OpenTelemetry backend."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_layouts(cls, data: Any) -> Any:
        return upgrade_verifier(data)

    def named_roles(self) -> list[tuple[str, str]]:
        """Every role given a model, with where (`roles.leader`, `debate.cascade.strong.roles.skeptic`): each is
        checked against the chain before anything starts (MarkovChain.check_roles)."""
        named = [(f"roles.{role}", role) for role in self.roles]
        for team in self.debate.cascade:
            named += [(f"debate.cascade.{team.name}.roles.{role}", role) for role in team.roles]
        return named

    def model_for(self, role: str) -> ModelConfig:
        """The model configuration role `role`'s turns run on: `[model]` with the role's own fields in place."""
        given = self.roles.get(role)
        return self.model if given is None else given.model.over(self.model)

    @field_serializer("roles")
    def _roles_given(self, value: dict[str, RoleConfig]) -> dict[str, Any]:
        # Only what each role sets: the rest is `[model]`'s, and a saved configuration reads as it was written.
        return {role: {"model": given.model.model_dump(exclude_none=True)} for role, given in value.items()}

    @field_validator("roles")
    @classmethod
    def _role_names(cls, value: dict[str, RoleConfig]) -> dict[str, RoleConfig]:
        for name in value:
            if not name.strip() or not all(c.isalnum() or c in "_-" for c in name):
                raise ValueError(f"role {name[:40]!r}: a role's name is letters, digits, - and _ (as a chain names it)")
        return value

    def task_options_for(self, name: str, model: type[_O]) -> _O:
        """Task `name`'s options as its own model (its defaults when none are given)."""
        return model.model_validate(self.task_options.get(name, {}))

    @field_validator("prompt_set")
    @classmethod
    def _known_prompt_set(cls, value: str) -> str:
        if value not in PROMPT_SETS and not os.path.isdir(value):
            raise ValueError(f"prompt set {value!r} is neither {' nor '.join(PROMPT_SETS)} nor a directory")
        return value
