"""An estimate's figure: its expected value and the ends of its range."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ZERO", "Range"]


class Range(BaseModel):
    """An expected value with its low and high ends."""

    model_config = ConfigDict(frozen=True)

    expected: float
    """Under the stated behaviour."""
    low: float
    """Every state agrees as early as the chain allows; nothing is re-asked; prefilters call least."""
    high: float
    """No state agrees before max_rounds; every reply is re-asked to the limit; prefilters call most."""

    def __add__(self, other: Range) -> Range:
        return Range(expected=self.expected + other.expected, low=self.low + other.low, high=self.high + other.high)

    def scaled(self, factor: float) -> Range:
        return Range(expected=self.expected * factor, low=self.low * factor, high=self.high * factor)


ZERO = Range(expected=0.0, low=0.0, high=0.0)
