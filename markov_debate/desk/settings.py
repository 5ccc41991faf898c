"""The desk's configuration: store, keys, workers, limits, prices. Resolved once by `debate serve` / `debate worker`."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir
from pydantic import BaseModel, ConfigDict, Field, field_validator

from debate.config import VerifierConfig
from markov_debate.desk.auth import ApiKey

__all__ = ["DESK_MAX_CLAIMS", "DeskSettings", "default_db_url", "desk_verifier"]


def default_db_url() -> str:
    """SQLite in the user data directory (DEBATE_DESK_DB overrides)."""
    configured = os.environ.get("DEBATE_DESK_DB")
    if configured:
        return configured
    folder = Path(user_data_dir("markov-debate", appauthor=False))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'desk.sqlite'}"


DESK_MAX_CLAIMS = 25
"""The desk's claim cap per audit when the verifier's configuration sets none (a desk bounds what one audit can
cost); the report's note says when it cuts."""


def desk_verifier(config: VerifierConfig) -> VerifierConfig:
    """`config` with the desk's claim cap when it sets none of its own."""
    if config.claims.max_claims is not None:
        return config
    claims = config.claims.model_copy(update={"max_claims": DESK_MAX_CLAIMS})
    return config.model_copy(update={"claims": claims})


class DeskSettings(BaseModel):
    """Everything the audit desk needs besides the Verifier's own configuration."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    db_url: str = Field(default_factory=default_db_url)
    """SQLAlchemy URL of the audit store (sqlite:///PATH or postgresql+psycopg://...)."""
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    """How audits are verified (the endpoint's API key is never stored: reports record the config without it).
    Claims per audit are capped at DESK_MAX_CLAIMS unless the configuration sets its own cap."""

    @field_validator("verifier")
    @classmethod
    def _claim_cap(cls, value: VerifierConfig) -> VerifierConfig:
        return desk_verifier(value)

    keys: list[ApiKey] = Field(default_factory=list)
    """API keys (hashed). Empty: no authentication, allowed on loopback only."""
    jobs: int = Field(default=2, ge=0)
    """Audits the in-process worker runs at once (0: no in-process worker; run `debate worker`)."""
    lease_s: float = Field(default=60.0, gt=0)
    """A running audit whose worker has not renewed its lease for this long goes back to the queue."""
    poll_s: float = Field(default=0.5, gt=0)
    """How often an idle worker looks for work."""
    max_attempts: int = Field(default=5, ge=1)
    """Transient failures (endpoint down) before an audit is marked failed."""
    stall_s: float = Field(default=120.0, gt=0)
    """`/v1/health` answers 503 when audits have been due this long and no worker has claimed or finished one."""
    outage_s: float = Field(default=300.0, gt=0)
    """`/v1/health` answers 503 when the in-process worker has found the model endpoint down for this long (audits
    are deferred, not failed, meanwhile, so the queue alone would look alive)."""
    breaker_failures: int = Field(default=3, ge=1)
    """Transient endpoint failures in a row that mark the endpoint down: claiming stops (audits keep their
    attempts) until a probe audit gets through."""
    breaker_max_s: float = Field(default=60.0, gt=0)
    """Longest pause between probes while the endpoint is down."""
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
    """Host names the desk answers to (any other Host gets 400: DNS rebinding); `--allowed-host` adds to them."""
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """Largest request body (a batch upload included); larger gets 413."""
    max_bodies_in_flight_bytes: int = Field(default=128 * 1024 * 1024, ge=1024)
    """Bytes of request bodies this process reads into memory at once, over every request (uploads, which go to
    files, aside); past it a request gets 503 with Retry-After before its body is read."""
    max_batch_items: int = Field(default=10_000, ge=1)
    """Largest batch, in items."""
    max_uploads: int = Field(default=16, ge=1)
    """Batch uploads read at once in all (each holds a socket and a spooled file); more get 429."""
    max_uploads_per_key: int = Field(default=2, ge=1)
    """Batch uploads one key may have being read at once; more get 429."""
    key_submits_per_minute: int = Field(default=600, ge=1)
    """Submissions (audits, batches, their forms) one key may make a minute; more get 429 with Retry-After."""
    key_max_pending: int = Field(default=20_000, ge=1)
    """Audits one key may have waiting or running; a submission past it gets 429 (a batch: the whole batch)."""
    price_prompt_per_mtok: float = Field(default=0.0, ge=0)
    """Price of a million prompt tokens, for the cost figures (0: cost not tracked)."""
    price_completion_per_mtok: float = Field(default=0.0, ge=0)
    """Price of a million completion tokens."""
    session_secret: str | None = None
    """Signs UI sessions and CSRF tokens; servers sharing a store behind one address need the same one
    (DEBATE_SESSION_SECRET). None: a random secret per start (sessions end with the process)."""
    queue_sample_rate: float = Field(default=0.1, ge=0, le=1)
    """Share of confident automated decisions the review queue samples for re-checking."""
    queue_seed: int = 0
    """Seed of that sample (the same seed gives the same sample)."""
    max_claim_chars: int | None = Field(default=2_000, ge=1)
    """Longest claim a request may give (each is sent in every debate prompt); None: no limit."""
    max_override_verifiers: int = Field(default=8, ge=1)
    """Verifiers a worker keeps for distinct per-audit override sets (least recently used closed first)."""

    @property
    def priced(self) -> bool:
        """Whether cost is tracked: a price was given (otherwise every page says "not tracked", never "$0")."""
        return self.price_prompt_per_mtok > 0 or self.price_completion_per_mtok > 0

    def secrets(self) -> list[str]:
        """Every configured secret, longest first: the endpoints' keys (a role's model's too), the session secret,
        the store's password."""
        found = [self.session_secret or ""]
        keys = [self.verifier.model.api_key, *(role.model.api_key for role in self.verifier.roles.values())]
        found += [key.get_secret_value() for key in keys if key is not None]
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            found.append(make_url(self.db_url).password or "")
        except (ArgumentError, ValueError):
            found.append("")  # an unparsable URL holds no password we could find; opening it fails loudly
        return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """`text` with every configured secret replaced: for error text that is stored, returned or logged."""
        for secret in self.secrets():
            text = text.replace(secret, "[redacted]")
        return text
