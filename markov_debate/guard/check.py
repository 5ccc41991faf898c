"""The verification in the request path: one long-lived Verifier per debate mode (the configured team for inline,
the `deferred` team for later), each answer checked under a deadline, behind a circuit breaker on the judge.

Before the breaker opens, a judge call is bounded for a caller who waits (`request_path`): a refused connection
fails at once, a 5xx or 429 gets one retry within a second, a silent judge is cut at --check-timeout.
The breaker: while the judge is known down (its Verifier could not be built, or answers failed on it
`BREAKER_FAILURES` times in a row), an answer is not sent to it at all; it goes by --on-failure at once. One request
at a time is let through as a probe, first after `JUDGE_RETRY_S`, then after twice as long, up to
`JUDGE_RETRY_MAX_S`; a probe that gets through closes the breaker.
What the caller reads of it names no address: the guard's internals are the operator's, in the guard's log."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack
from typing import Literal

from debate.config import VerifierConfig
from debate.errors import DebateError, InputError, ModelError, ModelUnavailableError
from debate.pipeline import Verifier
from debate.plugins import TaskInput
from debate.results import transient_failure
from debate.types import Report, Source
from markov_debate.guard.settings import DebateMode

__all__ = [
    "BREAKER_FAILURES",
    "JUDGE_RETRY_MAX_S",
    "JUDGE_RETRY_S",
    "NO_SOURCES",
    "REQUEST_PATH_ATTEMPTS",
    "REQUEST_PATH_RETRY_S",
    "Checker",
    "JudgeState",
    "request_path",
]

log = logging.getLogger("markov_debate.guard")

JudgeState = Literal["up", "down", "unknown"]
BREAKER_FAILURES = 3
"""Answers in a row whose verification failed on the judge (down, timing out, 5xx) before it counts as down."""
JUDGE_RETRY_S = 5.0
"""While the judge is down, the first wait before a request probes it again (doubled after each failed probe)."""
JUDGE_RETRY_MAX_S = 60.0
REQUEST_PATH_ATTEMPTS = 2
"""A judge call in the request path is tried at most twice (a 5xx or 429 gets one retry); longer retries belong to
the breaker's probe, not to a caller's request."""
REQUEST_PATH_RETRY_S = 1.0
"""The longest wait before that retry (a Retry-After asking for more is cut to it)."""
JUDGE_DOWN = "the judge is not reachable"
"""Why an answer was not verified while the judge is down (no address: the caller is told nothing of the guard's
internals)."""

NO_SOURCES = (
    "the request carried no sources: nothing checks the answer against them; its claims are judged on the judge "
    "model's own knowledge alone"
)


class Checker:
    """Verifies answers; `start` before the first, `aclose` after the last."""

    def __init__(self, config: VerifierConfig) -> None:
        config = request_path(config)
        self._configs: dict[DebateMode, VerifierConfig] = {
            "inline": config,
            "later": config.model_copy(update={"team": "deferred"}),
        }
        self._verifiers: dict[DebateMode, Verifier] = {}
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()
        self._failures = 0
        self._open_until = 0.0
        """While the breaker is open, when the next probe may go (0: closed)."""
        self._wait_s = JUDGE_RETRY_S
        self._probing = False
        self.judge: JudgeState = "unknown"
        """What the last verification said of the judge (readiness and /metrics report it)."""

    async def start(self, modes: set[DebateMode]) -> None:
        """Build the Verifiers of `modes` now, so a bad configuration fails at start, not on the first request. A
        judge that does not answer yet is no bad configuration: the guard starts, in any order with its judge,
        serves by --on-failure meanwhile, and builds the Verifier at the first probe after it answers."""
        for mode in sorted(modes):
            try:
                await self._verifier(mode)
                self.judge = "up"  # it answered while its Verifier was built
            except ModelUnavailableError as exc:
                self._trip(f"the judge does not answer yet ({exc})")

    async def _verifier(self, mode: DebateMode) -> Verifier:
        if mode not in self._verifiers:
            if self._lock.locked():
                raise ModelUnavailableError(JUDGE_DOWN)  # another request is trying the judge: no queue behind it
            async with self._lock:
                if mode not in self._verifiers:
                    verifier = Verifier(config=self._configs[mode])
                    self._verifiers[mode] = await self._stack.enter_async_context(verifier)
        return self._verifiers[mode]

    async def check(
        self,
        answer: str,
        *,
        question: str | None,
        sources: list[Source],
        request_id: str,
        mode: DebateMode,
        timeout_s: float,
    ) -> Report | str:
        """The answer's report, or why there is none (the verification failed, or ran past `timeout_s`, or the judge
        is known down and this request is not the probe)."""
        allowed, probe = self._may_try()
        if not allowed:
            return f"model_unavailable: {JUDGE_DOWN}"
        item = TaskInput(answer, question=question, reference=sources or None, id=request_id)
        try:
            result = await self._check(item, "rag" if sources else "general", mode, timeout_s)
        finally:
            if probe:
                self._probing = False
        self._count(result)
        return result

    async def _check(self, item: TaskInput, task: str, mode: DebateMode, limit_s: float) -> Report | str:
        try:
            verifier = await self._verifier(mode)
        except ModelUnavailableError as exc:
            log.warning("guard: the judge does not answer (%s)", exc)
            return f"model_unavailable: {JUDGE_DOWN}"
        try:
            async with asyncio.timeout(limit_s):
                return await verifier.verify(item, task=task)
        except TimeoutError:
            return f"the verification took longer than {limit_s:g} s"
        except InputError as exc:
            return f"the answer could not be read: {exc}"
        except ModelError as exc:
            log.warning("guard: a verification failed on the judge: %s", exc)
            return f"{exc.kind}: {JUDGE_DOWN}" if exc.kind == "model_unavailable" else f"{exc.kind}: the judge failed"
        except DebateError as exc:
            return f"{exc.kind}: {exc}"

    def _may_try(self) -> tuple[bool, bool]:
        """(whether this request may ask the judge, whether it is the probe while the breaker is open)."""
        if not self._open_until:
            return True, False
        if self._probing or time.monotonic() < self._open_until:
            return False, False
        self._probing = True  # this request probes; the others keep failing fast until it is back
        return True, True

    def _count(self, result: Report | str) -> None:
        failed = isinstance(result, str) and result.startswith(("model_unavailable", "the verification took"))
        if isinstance(result, Report):
            transient = transient_failure(result)
            failed = transient is not None and transient.kind in ("model_unavailable", "timeout")
        if not failed:
            if self._open_until:
                log.info("guard: the judge answers again; verification is back on")
            self._failures, self._open_until, self._wait_s, self.judge = 0, 0.0, JUDGE_RETRY_S, "up"
            return
        self._failures += 1
        if self._open_until or self._failures >= BREAKER_FAILURES:
            self._trip(f"the judge failed {self._failures} verification(s) in a row")

    def _trip(self, why: str) -> None:
        """Open the breaker (again): the next probe after the current wait, which doubles up to the maximum."""
        if not self._open_until:
            log.warning("guard: %s; answers go by --on-failure without asking it, probed every %g s", why, self._wait_s)
        else:
            self._wait_s = min(self._wait_s * 2, JUDGE_RETRY_MAX_S)
        self._open_until = time.monotonic() + self._wait_s
        self.judge = "down"

    async def aclose(self) -> None:
        await self._stack.aclose()


def request_path(config: VerifierConfig) -> VerifierConfig:
    """`config` with its judge calls bounded for a caller who waits: a refused connection fails at once (nothing
    listens: the answer goes by --on-failure now, and the breaker counts it), a 5xx or 429 is retried at most once
    within `REQUEST_PATH_RETRY_S`; a judge that does not answer at all is cut by the check's deadline."""
    model = config.model
    bounded = model.model_copy(
        update={
            "max_attempts": min(model.max_attempts, REQUEST_PATH_ATTEMPTS),
            "backoff_initial_s": min(model.backoff_initial_s, REQUEST_PATH_RETRY_S / 2),
            "backoff_max_s": min(model.backoff_max_s, REQUEST_PATH_RETRY_S),
            "retry_refused": False,
        }
    )
    return config.model_copy(update={"model": bounded})
