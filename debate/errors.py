"""The one exception hierarchy. Every stage catches `DebateError` at its own boundary and turns it into a typed
`Failure` on the claim or response it was working on; nothing here aborts other items.

Only `ReplyUnusableError` triggers a re-ask: it means the model answered, but not in a usable form. A network
problem (`ModelUnavailableError`) is retried by the model client's retry policy, never re-asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import ValidationError

__all__ = [
    "BatchError",
    "CalibrationError",
    "ChainError",
    "ContextTooLongError",
    "DebateError",
    "EmbeddedModelError",
    "EndpointConnectionError",
    "EndpointDownError",
    "EndpointHTTPError",
    "EvidenceUnavailableError",
    "ExtractionError",
    "Hint",
    "InputError",
    "InputTooLongError",
    "InternalError",
    "MalformedReplyError",
    "ModelError",
    "ModelRequestError",
    "ModelUnavailableError",
    "NoVerdictError",
    "PluginLoadError",
    "PromptError",
    "ReplyUnusableError",
    "TransportError",
    "UnknownNameError",
    "UsageError",
    "WorkerError",
    "is_fatal",
    "validation_problem",
]


@dataclass(frozen=True)
class Hint:
    """What to do about an error, said twice: in the Python API's terms and in the command line's."""

    api: str
    """E.g. "set ModelConfig.model (or DEBATE_MODEL)"."""
    cli: str
    """E.g. "pass --model (or set DEBATE_MODEL)"."""


class DebateError(Exception):
    """Base of every error the engine raises on purpose. `str(error)` speaks the Python API's terms;
    `error.for_cli()` the command line's."""

    kind: ClassVar[str] = "input"
    transient: bool = False
    """True when the same work may succeed later (endpoint down, rate limits): such a failure is never final."""
    hint: Hint | None = None
    """What to do about it, when there is something to do."""

    def with_hint(self, api: str, cli: str | None = None) -> DebateError:
        """This error with a hint (`cli` defaults to `api`: the same words fit both)."""
        self.hint = Hint(api=api, cli=cli if cli is not None else api)
        return self

    @property
    def message(self) -> str:
        """What went wrong, without the hint."""
        return str(self.args[0]) if self.args else type(self).__name__

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}; {self.hint.api}"

    def for_cli(self) -> str:
        """The one-line message the command line prints."""
        return self.message if self.hint is None else f"{self.message}; {self.hint.cli}"

    def __reduce__(self) -> tuple[object, ...]:
        # Subclasses take keyword-only arguments, which Exception's pickling drops: rebuild from args and state, so
        # an error raised in a worker process (--workers) reaches the parent as the same typed error.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[DebateError], args: tuple[object, ...], state: dict[str, object]) -> DebateError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class UsageError(DebateError):
    """Bad arguments or configuration: the command exits 2 with one line."""

    kind = "usage"


class InternalError(DebateError):
    """A broken invariant: a bug in markov-debate, never the input's or the model's fault (please report it)."""

    kind = "internal"


class InputError(DebateError, ValueError):
    """One input item is malformed (a missing document, an empty response); the message names the field."""

    kind = "input"


class ModelError(DebateError):
    """A model call failed. Never turned into a verdict."""

    kind: ClassVar[str] = "model_unavailable"


class ModelUnavailableError(ModelError):
    """Retryable failures (429, 5xx, timeouts, connection errors) persisted past the attempt limit."""

    kind = "model_unavailable"
    transient = True


class ModelRequestError(ModelError):
    """The endpoint refused the request (4xx); retrying cannot help."""

    kind: ClassVar[str] = "model_rejected"

    def __init__(self, message: str, *, status: int | None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def fatal(self) -> bool:
        """Authentication, permission or unknown model/URL: every further call would fail the same way."""
        return self.status in (401, 403, 404)


def is_fatal(exc: BaseException) -> bool:
    """A failure every further call would repeat (401/403/404): raised, never recorded on one item."""
    return isinstance(exc, ModelRequestError) and exc.fatal


class ContextTooLongError(ModelRequestError):
    """The prompt does not fit the model's context window (a 400 that names the context length)."""

    kind: ClassVar[str] = "context_too_long"


class ReplyUnusableError(DebateError, ValueError):
    """A model reply cannot be used; the message says why and is shown to the model in the re-ask."""

    kind = "reply_unusable"


class EvidenceUnavailableError(DebateError):
    """Evidence could not be obtained: the search backend failed or answered in a form we cannot read."""

    kind = "evidence_unavailable"

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ExtractionError(DebateError):
    """No usable claims could be obtained for a response (the model's replies stayed unusable)."""

    kind = "extraction_failed"


class CalibrationError(UsageError):
    """A calibration file that cannot be read, or cannot be used for this run; the message says why in one line."""


class PromptError(UsageError, ValueError):
    """A prompt file is malformed, or rendering it was given the wrong variables."""


class ChainError(UsageError, ValueError):
    """The chain definition is inconsistent; the message says what and where."""


class EmbeddedModelError(DebateError):
    """The embedded model is missing or its server did not come up."""

    kind = "model_unavailable"


class WorkerError(DebateError):
    """A worker process died or raised something that cannot cross a process boundary."""


class NoVerdictError(DebateError):
    """The debate reached no verdict on the test case (unusable replies, a failed endpoint, nothing to check)."""

    kind = "reply_unusable"


class InputTooLongError(InputError):
    """The input has more lines than the reader was allowed (blank lines count: each one is read)."""


class BatchError(ModelRequestError):
    """The batch cannot proceed: the endpoint refuses every request (finished records are kept)."""


class EndpointDownError(ModelUnavailableError):
    """Several items in a row failed for a transient reason: the endpoint is down; the batch stops."""


class UnknownNameError(UsageError, LookupError):
    """No implementation is registered under the name; the message lists the known ones and the closest match."""


class PluginLoadError(UsageError):
    """An entry point (a built-in's or an installed plugin's) names a module or object that does not import; the
    message names the entry point, its distribution and where the module was found (a folder of the same name on
    sys.path shadows an installed package)."""


def validation_problem(exc: ValidationError, whole: str = "") -> str:
    """The first problem pydantic found, as `where: what` (`where` is the dotted field path, or `whole` when the
    problem is with the value as a whole): the one form every error message about a bad file, reply or option
    uses."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or whole
    return f"{where}: {first['msg']}" if where else str(first["msg"])


class TransportError(ModelError):
    """One HTTP attempt to the model endpoint failed. The model client turns every one into a
    `ModelUnavailableError` or `ModelRequestError` with its hint before it leaves the client (debate/llm); rooted in
    `ModelError` so that one escaping by a bug is still a model failure, never a verdict."""


class EndpointHTTPError(TransportError):
    """The endpoint answered with an HTTP error status (made by debate.llm._transport.http_error)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        body: bytes,
        headers: dict[str, str],
        detail: object,
        retry_after: float | None,
        transient: bool,
        method: str,
        url: str,
    ) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status."""
        self.body = body
        """The response body, as sent (with any echoed key already redacted by the client)."""
        self.headers = headers
        """The response headers, keys lower-cased."""
        self.detail = detail
        """The error the body states (an OpenAI-style `{"error": {...}}` unwrapped), else its text."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait (Retry-After, retry-after-ms), when it said."""
        self.transient = transient
        self.method, self.url = method, url

    def mentions(self, *words: str) -> bool:
        """Whether the error's message or detail names any of `words` (case-insensitive)."""
        text = (self.message + str(self.detail)).lower()
        return any(word in text for word in words)


class EndpointConnectionError(TransportError):
    """No answer: the connection was refused, reset or dropped mid-body, or the request timed out."""

    transient = True

    def __init__(
        self, *, method: str, url: str, timeout: bool, reason: str = "connection error", refused: bool = False
    ) -> None:
        self.method, self.url, self.timeout = method, url, timeout
        self.refused = refused
        """No connection was made at all (refused, no route, host not found): nothing listens there now."""
        self.reason = "request timed out" if timeout else reason
        """What went wrong in plain words (no transport internals such as aiohttp's `ssl:default`)."""
        super().__init__(self.reason)


class MalformedReplyError(TransportError):
    """A 200 whose body is not a usable chat completion (HTML, truncated JSON, an error object, no choices, no
    content): a fault of the endpoint or a proxy in front of it, so it is retried like a 5xx."""

    transient = True
