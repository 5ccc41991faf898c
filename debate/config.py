"""Configuration models. Every knob of an ablation lives here, so an ablation is a config change."""

from __future__ import annotations

import os
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlparse

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)

from debate._migrations import upgrade_prefilter, upgrade_verifier
from debate.types import RollupName, StopSetting, parse_stop

__all__ = [
    "PROMPT_SETS",
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
MAX_SECONDS = 86_400.0
"""The longest timeout or back-off step accepted (a day)."""
MAX_CONCURRENCY = 1024
"""The most requests or claims in flight that a limit may allow."""

StructuredOutputMode = Literal["auto", "json_schema", "json_object", "none"]


class _Config(BaseModel):
    # Field docstrings become descriptions: the CLI's help text comes from them.
    # No infinite or NaN number anywhere: a timeout of inf or a price of nan would reach a sleep or a sum.
    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True, allow_inf_nan=False
    )


_O = TypeVar("_O", bound=BaseModel)


class DebateConfig(_Config):
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
    verdict is the posterior's side."""
    force_calibration: bool = False
    """Let the posterior stop use a calibration whose checks failed (its p_factual is not calibrated)."""
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

    @property
    def threshold(self) -> float | None:
        """The posterior stop's threshold; None under the paper's rule."""
        rule = parse_stop(self.stop)
        return None if rule == "consensus" else rule


def _header_safe(value: SecretStr | None) -> SecretStr | None:
    """A key is sent in an HTTP header: printable ASCII without spaces, else refused here (never shown)."""
    if value is not None and not all("\x21" <= char <= "\x7e" for char in value.get_secret_value()):
        raise ValueError("holds a character an HTTP header cannot carry (a space, a control character or non-ASCII)")
    return value


def _http_url(value: str | None) -> str | None:
    if value is None:
        return None
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"must be an http(s) URL with a host, such as http://localhost:8000/v1; got {value!r}")
    return value


class ModelConfig(_Config):
    """How to reach the model. No base_url means: start the embedded model."""

    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://localhost:8000/v1."""
    model: str | None = None
    """Model name; when omitted, the endpoint's only model is used."""
    api_key: SecretStr | None = Field(default=None, exclude=True)
    """Never written to reports."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature (0: as deterministic as the endpoint allows)."""
    max_tokens: int = Field(default=512, ge=16, le=1_000_000)
    """Completion token limit per call."""
    seed: int | None = Field(default=0, ge=-(2**63), le=2**63 - 1)
    """Seed sent to the endpoint."""
    timeout_s: float = Field(default=120.0, gt=0, le=MAX_SECONDS)
    """Per-request timeout."""
    max_attempts: int = Field(default=5, ge=1, le=20)
    """HTTP attempts per call (first try included) on retryable errors."""
    backoff_initial_s: float = Field(default=1.0, gt=0, le=MAX_SECONDS)
    """First backoff step; later steps grow exponentially with full jitter."""
    backoff_max_s: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    """Longest single wait, Retry-After included."""
    retry_refused: bool = True
    """Retry a call whose connection was refused (nothing listening). False: it fails at once, for a caller that
    must not wait on a dead endpoint (the guard's judge, whose breaker probes it later instead)."""
    structured_output: StructuredOutputMode = "auto"
    """auto: try json_schema, fall back to llama.cpp's json_object+schema, then plain prompting."""
    max_concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    """Model requests in flight at once: the one limit on model calls (a slot is held for one HTTP attempt)."""
    requests_per_minute: int | None = Field(default=None, ge=1, le=10**9)
    """Most HTTP attempts started per minute, shared by every worker process of a run (None: no limit)."""
    tokens_per_minute: int | None = Field(default=None, ge=1, le=10**12)
    """Most tokens (prompt estimate + completion limit, settled to actual usage) per minute, shared likewise."""
    price_in: float | None = Field(default=None, ge=0, le=1e6)
    """USD per million input tokens (None: the price table, if it knows the model)."""
    price_out: float | None = Field(default=None, ge=0, le=1e6)
    """USD per million output tokens."""
    max_string_chars: int | None = Field(default=None, ge=16, le=1_000_000)
    """Bound every string of a structured reply to this many characters, and raise the token limit to the schema's
    worst case, so a grammar-constrained reply always closes (the embedded model: 300)."""

    @field_validator("api_key")
    @classmethod
    def _header_safe_key(cls, value: SecretStr | None) -> SecretStr | None:
        return _header_safe(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @classmethod
    def from_env(cls, **overrides: Any) -> ModelConfig:
        """Flags win over OPENAI_BASE_URL, OPENAI_API_KEY and DEBATE_MODEL."""
        values: dict[str, Any] = {
            "base_url": os.environ.get("OPENAI_BASE_URL") or None,
            "model": os.environ.get("DEBATE_MODEL") or None,
            "api_key": os.environ.get("OPENAI_API_KEY") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)


ENDPOINT_FIELDS = frozenset({"model", "api_key", "price_in", "price_out", "requests_per_minute", "tokens_per_minute"})
"""`[model]`'s fields a role on another endpoint does not take from it: they hold for `[model]`'s endpoint only."""


class RoleModelConfig(_Config):
    """A role's own model: each field given here replaces `[model]`'s, each one left out is taken from it (the
    fields and their meaning are `[model]`'s; a test holds the two lists equal)."""

    base_url: str | None = None
    """OpenAI-compatible endpoint of this role's model."""
    model: str | None = None
    """Model name; with its own base_url and no name, that endpoint's only model."""
    api_key: SecretStr | None = Field(default=None, exclude=True)
    """The key of this role's endpoint; never written to reports."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Sampling temperature."""
    max_tokens: int | None = Field(default=None, ge=16, le=1_000_000)
    """Completion token limit per call."""
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    """Seed sent to the endpoint."""
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """Per-request timeout."""
    max_attempts: int | None = Field(default=None, ge=1, le=20)
    """HTTP attempts per call on retryable errors."""
    backoff_initial_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """First backoff step."""
    backoff_max_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """Longest single wait."""
    retry_refused: bool | None = None
    """Retry a call whose connection was refused."""
    structured_output: StructuredOutputMode | None = None
    """Structured output mode."""
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    """Requests in flight at once to this role's endpoint (an endpoint's own limit, not shared with `[model]`'s)."""
    requests_per_minute: int | None = Field(default=None, ge=1, le=10**9)
    """Most HTTP attempts started per minute on this role's endpoint."""
    tokens_per_minute: int | None = Field(default=None, ge=1, le=10**12)
    """Most tokens per minute on this role's endpoint."""
    price_in: float | None = Field(default=None, ge=0, le=1e6)
    """USD per million input tokens of this role's model."""
    price_out: float | None = Field(default=None, ge=0, le=1e6)
    """USD per million output tokens of this role's model."""
    max_string_chars: int | None = Field(default=None, ge=16, le=1_000_000)
    """Bound on every string of a structured reply."""

    @field_validator("api_key")
    @classmethod
    def _header_safe_key(cls, value: SecretStr | None) -> SecretStr | None:
        return _header_safe(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    def over(self, base: ModelConfig) -> ModelConfig:
        """`base` with the fields given here in its place. A role on another endpoint takes none of the fields that
        belong to `base`'s endpoint (ENDPOINT_FIELDS: its model name, key, prices and rate limits)."""
        given = {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}
        if "base_url" in given and given["base_url"] != base.base_url:
            base = base.model_copy(update=dict.fromkeys(ENDPOINT_FIELDS - set(given)))
        return ModelConfig.model_validate({**base.model_dump(), "api_key": base.api_key, **given})


class RoleConfig(_Config):
    """What one role of the chain runs on, where it differs from the rest of the team."""

    model: RoleModelConfig = Field(default_factory=RoleModelConfig)
    """The role's model (`[roles.leader.model]`): the fields of `[model]`, each one not given taken from it."""


class ClaimConfig(_Config):
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


class RetrievalConfig(_Config):
    """Top-k sentences of a given document per claim."""

    retriever: str = "dense"
    """Document retriever: dense (all-MiniLM-L6-v2 embeddings, offline), bm25 (bm25s), or a plugin's."""
    top_k: int = Field(default=10, ge=1, le=100_000)
    """Sentences per claim (paper: 10)."""
    cache_dir: str | None = None
    """Also keep retrieval results on disk, keyed by content hash."""


class SearchConfig(_Config):
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


class PrefilterConfig(_Config):
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


class TelemetryConfig(_Config):
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


class VerifierConfig(_Config):
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
