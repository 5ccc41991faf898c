"""The verification in the request path: one long-lived Verifier per debate mode (the configured team for inline,
the `deferred` team for later), each answer checked under a deadline."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from debate.config import VerifierConfig
from debate.errors import DebateError, InputError
from debate.pipeline import Verifier
from debate.plugins import TaskInput
from debate.types import Report, Source
from markov_debate.guard.settings import DebateMode

__all__ = ["NO_SOURCES", "Checker"]

NO_SOURCES = (
    "the request carried no sources: nothing checks the answer against them; its claims are judged on the judge "
    "model's own knowledge alone"
)


class Checker:
    """Verifies answers; `start` before the first, `aclose` after the last."""

    def __init__(self, config: VerifierConfig) -> None:
        self._configs: dict[DebateMode, VerifierConfig] = {
            "inline": config,
            "later": config.model_copy(update={"team": "deferred"}),
        }
        self._verifiers: dict[DebateMode, Verifier] = {}
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()

    async def start(self, modes: set[DebateMode]) -> None:
        """Build the Verifiers of `modes` now, so a bad configuration fails at start, not on the first request."""
        for mode in sorted(modes):
            await self._verifier(mode)

    async def _verifier(self, mode: DebateMode) -> Verifier:
        if mode not in self._verifiers:
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
        """The answer's report, or why there is none (the verification failed, or ran past `timeout_s`)."""
        verifier = await self._verifier(mode)
        item = TaskInput(answer, question=question, reference=sources or None, id=request_id)
        try:
            async with asyncio.timeout(timeout_s):
                return await verifier.verify(item, task="rag" if sources else "general")
        except TimeoutError:
            return f"the verification took longer than {timeout_s:g} s"
        except InputError as exc:
            return f"the answer could not be read: {exc}"
        except DebateError as exc:
            return f"{exc.kind}: {exc}"

    async def aclose(self) -> None:
        await self._stack.aclose()
