"""The retry policy for every remote call (model endpoint, search backend): tenacity, exponential backoff with
full jitter, a server's Retry-After honoured, bounded attempts, only for transient failures."""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

__all__ = ["TRANSIENT_STATUS", "retry_after_seconds", "retrying"]

log = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))
"""HTTP statuses worth retrying."""


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait, from retry-after-ms or Retry-After (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass  # malformed: fall through to Retry-After
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


class _Wait:
    def __init__(self, initial: float, maximum: float, headers_of: Callable[[BaseException], Mapping[str, str] | None]):
        self._maximum = maximum
        self._headers_of = headers_of
        self._exponential = wait_random_exponential(multiplier=initial, max=maximum)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        headers = self._headers_of(exc) if exc is not None else None
        asked = retry_after_seconds(headers) if headers is not None else None
        if asked is not None:
            return min(asked, self._maximum)
        return float(self._exponential(state))


def retrying(
    *,
    attempts: int,
    initial_s: float,
    max_s: float,
    is_transient: Callable[[BaseException], bool],
    headers_of: Callable[[BaseException], Mapping[str, str] | None],
    describe: Callable[[BaseException], str],
) -> AsyncRetrying:
    """An AsyncRetrying that re-raises the last error once `attempts` are spent."""

    def log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "remote call failed (%s); retry %d of %d",
            describe(exc) if exc is not None else "?",
            state.attempt_number,
            attempts - 1,
        )

    return AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=_Wait(initial_s, max_s, headers_of),
        retry=retry_if_exception(is_transient),
        reraise=True,
        before_sleep=log_retry,
    )
