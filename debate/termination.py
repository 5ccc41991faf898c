"""Small composable termination rules, evaluated after S0 and after every debate round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["AllOf", "AnyOf", "Consensus", "MaxRounds", "MinRounds", "Progress", "TerminationRule", "paper_termination"]


@dataclass(frozen=True)
class Progress:
    """What the rules may look at."""

    rounds: int
    """Debate rounds completed (0 right after S0)."""
    consensus: bool
    """Whether the last state's speakers agreed (S0, a single speaker, always agrees)."""


class TerminationRule(Protocol):
    def should_stop(self, progress: Progress) -> bool: ...


class _Combinable:
    def __and__(self, other: TerminationRule) -> AllOf:
        return AllOf((self, other))  # type: ignore[arg-type]

    def __or__(self, other: TerminationRule) -> AnyOf:
        return AnyOf((self, other))  # type: ignore[arg-type]


@dataclass(frozen=True)
class MinRounds(_Combinable):
    n: int

    def should_stop(self, progress: Progress) -> bool:
        return progress.rounds >= self.n


@dataclass(frozen=True)
class MaxRounds(_Combinable):
    n: int

    def should_stop(self, progress: Progress) -> bool:
        return progress.rounds >= self.n


@dataclass(frozen=True)
class Consensus(_Combinable):
    def should_stop(self, progress: Progress) -> bool:
        return progress.consensus


@dataclass(frozen=True)
class AllOf(_Combinable):
    rules: tuple[TerminationRule, ...]

    def should_stop(self, progress: Progress) -> bool:
        return all(rule.should_stop(progress) for rule in self.rules)


@dataclass(frozen=True)
class AnyOf(_Combinable):
    rules: tuple[TerminationRule, ...]

    def should_stop(self, progress: Progress) -> bool:
        return any(rule.should_stop(progress) for rule in self.rules)


def paper_termination(*, min_rounds: int, max_rounds: int) -> TerminationRule:
    """Stop at max_rounds, or once min_rounds are done and the last round agreed."""
    return MaxRounds(max_rounds) | (MinRounds(min_rounds) & Consensus())
