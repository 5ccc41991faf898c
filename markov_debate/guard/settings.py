"""What the guard does with an answer, per deployment, per route and per caller's key."""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from debate.config import VerifierConfig

__all__ = [
    "GUARD_BODY_MB",
    "ActAt",
    "DebateMode",
    "FailureMode",
    "GuardKey",
    "GuardSettings",
    "Policy",
    "RouteSettings",
    "StreamMode",
]

Policy = Literal["annotate", "flag", "block"]
"""annotate: the answer passes with its verification; flag: it passes and, when risky, waits for a reviewer on the
desk; block: a risky answer is replaced by the block message, which says why."""
DebateMode = Literal["inline", "later"]
"""inline: claims the cheap checks leave open are debated before the answer is returned; later: after it (the
answer is returned on the cheap checks, and the audit waits on the desk for a worker's debate)."""
FailureMode = Literal["open", "closed"]
"""When the verification cannot run or finish in time: open passes the answer marked unverified; closed refuses it."""
StreamMode = Literal["hold", "pass"]
"""For `stream: true`: hold verifies the whole answer, then streams it; pass streams it as it comes and ends with an
event carrying the verification (nothing can be blocked or replaced then)."""
ActAt = Literal["moderate", "high"]
"""The risk at which flag flags and block blocks."""

DEFAULT_BLOCK_MESSAGE = (
    "This answer was withheld: an automatic check found statements its sources do not support ({reasons}). "
    "It has been recorded for review."
)


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RouteSettings(_Settings):
    """What one route (`/route/<name>/v1/...`) or one caller's key changes; unset fields keep the deployment's."""

    policy: Policy | None = None
    """The route's policy."""
    debate: DebateMode | None = None
    """Whether the debate runs in the request path."""
    on_failure: FailureMode | None = None
    """Open or closed when the verification fails."""
    act_at: ActAt | None = None
    """The risk at which flag and block act."""


class GuardKey(RouteSettings):
    """A caller's key (only its SHA-256 is kept) and what it changes; it wins over the route's."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@\-]+$")
    """Who holds it: recorded with every decision made for it."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The key's SHA-256, hex (`debate new-key` prints one)."""


GUARD_BODY_MB = 4.0
"""The guard's largest request body by default, in MiB (a chat request with its sources)."""


class GuardSettings(_Settings):
    """Everything the guard needs besides the Verifier's own configuration."""

    upstream: str = Field(pattern=r"^https?://")
    """The endpoint answers come from (OpenAI-compatible, its /v1 base URL)."""
    upstream_key: SecretStr | None = Field(default=None, exclude=True)
    """The upstream's key; None: the caller's Authorization is passed on (only when the guard itself has no keys)."""
    policy: Policy = "annotate"
    """The deployment's policy."""
    debate: DebateMode = "inline"
    """Whether the debate runs in the request path."""
    on_failure: FailureMode = "open"
    """Open or closed when the verification fails or runs out of time."""
    stream: StreamMode = "hold"
    """How `stream: true` requests are answered."""
    act_at: ActAt = "high"
    """The risk at which flag and block act."""
    block_below: float | None = Field(default=None, ge=0, le=1)
    """With a calibration: an answer whose probability of being factual is below this counts as high risk."""
    block_message: str = Field(default=DEFAULT_BLOCK_MESSAGE, min_length=1, max_length=2000)
    """What replaces a blocked answer; `{reasons}` is replaced by why."""
    upstream_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """Seconds the upstream may take to answer (for a stream: to start, and between two chunks)."""
    check_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """Seconds the verification in the request path may take; past it, on_failure decides."""
    max_body_bytes: int = Field(default=int(GUARD_BODY_MB * 1024 * 1024), ge=1024)
    """The largest request body accepted (`--max-body-mb`; past it 413)."""
    max_answer_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """The largest upstream answer, whole or streamed (each is held whole to be verified); past it 502
    upstream_malformed, or that error in band once a `pass` stream has started."""
    routes: dict[str, RouteSettings] = Field(default_factory=dict)
    """Per-route settings, by route name."""
    keys: list[GuardKey] = Field(default_factory=list)
    """The callers' keys; when any is given every request needs one."""
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
    """Without keys, the names the guard answers to (the Host header): a web page can point a name it controls at
    the guard's address (DNS rebinding) but cannot make a browser send one of these. With keys, any."""
    db_url: str
    """The desk's store, where every decision is kept."""
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    """The Verifier's configuration (the judge's endpoint, prefilters, chain)."""

    @model_validator(mode="after")
    def _names(self) -> Self:
        names = [k.name for k in self.keys]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"keys: a name is used twice: {', '.join(twice)}")
        bad = [name for name in self.routes if not name or not name.replace("-", "").replace("_", "").isalnum()]
        if bad:
            raise ValueError(f"routes: a route name is letters, digits, - and _: {bad[0][:40]!r}")
        return self

    def key_for(self, token: str) -> GuardKey | None:
        """The key whose hash matches `token` (compared in constant time), or None."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        found = None
        for key in self.keys:
            if hmac.compare_digest(key.sha256, digest):
                found = key
        return found

    def effective(self, route: str | None, key: GuardKey | None) -> RouteSettings:
        """The settings a request runs under: the key's, else the route's, else the deployment's."""
        chosen: dict[str, object] = {
            "policy": self.policy,
            "debate": self.debate,
            "on_failure": self.on_failure,
            "act_at": self.act_at,
        }
        for layer in (self.routes.get(route or ""), key):
            if layer is not None:
                chosen.update({f: v for f in chosen if (v := getattr(layer, f)) is not None})
        return RouteSettings.model_validate(chosen)
