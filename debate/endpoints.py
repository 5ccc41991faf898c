"""How to reach a model: `[model]`, and a role's own model (`[roles.<role>.model]`) over it."""

from __future__ import annotations

import os
from typing import Any, Self
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from debate.types import SAMPLING_FIELDS, ModelIdentity, StructuredOutputMode

__all__ = [
    "ENDPOINT_FIELDS",
    "MAX_CONCURRENCY",
    "MAX_SECONDS",
    "SAMPLING_FIELDS",
    "Config",
    "ModelConfig",
    "RoleConfig",
    "RoleModelConfig",
    "StructuredOutputMode",
    "header_safe",
    "unique_label",
]

MAX_SECONDS = 86_400.0
"""The longest timeout or back-off step accepted (a day)."""
MAX_CONCURRENCY = 1024
"""The most requests or claims in flight that a limit may allow."""


class Config(BaseModel):
    """The configuration's base: no unknown key, frozen, field docstrings as descriptions."""

    # Field docstrings become descriptions: the CLI's help text comes from them.
    # No infinite or NaN number anywhere: a timeout of inf or a price of nan would reach a sleep or a sum.
    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True, allow_inf_nan=False
    )


def header_safe(value: SecretStr | None) -> SecretStr | None:
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


class _Endpoint(Config):
    """What every model's settings check: a key an HTTP header can carry, an http(s) URL with a host."""

    @field_validator("api_key", check_fields=False)
    @classmethod
    def _header_safe_key(cls, value: SecretStr | None) -> SecretStr | None:
        return header_safe(value)

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)


def _prices_together(config: BaseModel) -> None:
    # A price half given would price the other half at $0 "as given": a run under --max-cost would pass its limit.
    given = [name for name in ("price_in", "price_out") if getattr(config, name) is not None]
    if len(given) == 1:
        other = "price_out" if given[0] == "price_in" else "price_in"
        raise ValueError(f"{given[0]} is given without {other}: a model's price is both or neither")


class ModelConfig(_Endpoint):
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

    @model_validator(mode="after")
    def _priced_whole(self) -> Self:
        _prices_together(self)
        return self

    def identity(self, name: str | None = None) -> ModelIdentity:
        """This model's identity (`name`: the model name the endpoint resolved, where it was asked)."""
        return ModelIdentity(
            endpoint=self.base_url, name=name or self.model, **{f: getattr(self, f) for f in SAMPLING_FIELDS}
        )

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


class RoleModelConfig(_Endpoint):
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

    @model_validator(mode="after")
    def _priced_whole(self) -> Self:
        _prices_together(self)
        return self

    def over(self, base: ModelConfig) -> ModelConfig:
        """`base` with the fields given here in its place. A role on another endpoint takes none of the fields that
        belong to `base`'s endpoint (ENDPOINT_FIELDS: its model name, key, prices and rate limits); a role on another
        model of the same endpoint does not take `base`'s given price, which is that model's."""
        given = {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}
        if "base_url" in given and given["base_url"] != base.base_url:
            base = base.model_copy(update=dict.fromkeys(ENDPOINT_FIELDS - set(given)))
        elif "model" in given and given["model"] != base.model and "price_in" not in given:
            base = base.model_copy(update={"price_in": None, "price_out": None})
        return ModelConfig.model_validate({**base.model_dump(), "api_key": base.api_key, **given})


class RoleConfig(Config):
    """What one role of the chain runs on, where it differs from the rest of the team."""

    model: RoleModelConfig = Field(default_factory=RoleModelConfig)
    """The role's model (`[roles.leader.model]`): the fields of `[model]`, each one not given taken from it."""


def unique_label(name: str, config: ModelConfig, default: ModelConfig, taken: set[str]) -> str:
    """A model's name in its run, made unique when another of the run's models has that name: by the endpoint's
    host (two providers of one model at two prices are two models), or on one endpoint by the sampling settings
    that differ from `default`'s (a Skeptic at temperature 0.7 is another agent than one at 0). Its price and
    calibration identity are its model's (ModelIdentity), never read from this label."""
    if name not in taken:
        return name
    host = urlparse(config.base_url).netloc if config.base_url else "scripted"
    if config.base_url != default.base_url:
        label = f"{name}@{host}"
    else:
        differ = config.identity().sampling_differences(default.identity().sampling())
        label = f"{name}[{','.join(f'{f}={now}' for f, (_, now) in differ.items())}]" if differ else f"{name}@{host}"
    unique, extra = label, 2
    while unique in taken:
        unique, extra = f"{label}#{extra}", extra + 1
    return unique
