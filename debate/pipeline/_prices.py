"""Model prices for `--estimate` and the run's cost: the user's `--model.price-in/--model.price-out`, else a small
table of list prices. Prices change and deals differ: the table says its date and every figure computed from it says
which price it used."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.config import ModelConfig
from debate.types import Usage

__all__ = ["PRICE_TABLE", "PRICE_TABLE_DATE", "Price", "cost_of", "price_for"]

PRICE_TABLE_DATE = "2025-06"
"""When the table's list prices were copied from the vendors' pricing pages."""

PRICE_TABLE: dict[str, tuple[float, float]] = {
    # USD per million input tokens, per million output tokens (OpenAI's list prices, standard tier)
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}


class Price(BaseModel):
    """USD per million tokens, and where the figure comes from."""

    model_config = ConfigDict(frozen=True)

    input: float = Field(ge=0)
    """USD per million input tokens."""
    output: float = Field(ge=0)
    """USD per million output tokens."""
    source: Literal["given", "table", "local"]
    """given (--model.price-in/--model.price-out), table (PRICE_TABLE, as of PRICE_TABLE_DATE) or local (the
    embedded model)."""

    def describe(self) -> str:
        where = {
            "given": "as given",
            "table": f"list price as of {PRICE_TABLE_DATE}; --model.price-in/--model.price-out for yours",
            "local": "local model",
        }[self.source]
        return f"${self.input:g} in / ${self.output:g} out per million tokens ({where})"


def price_for(model: ModelConfig, *, embedded: bool = False, name: str | None = None) -> Price | None:
    """The price in force: the configured one (given for this model: see RoleModelConfig.over), the embedded
    model's (free), the table's for the model's name (the configured or resolved one, else `name`, the endpoint's
    only model as resolved; never a run's label such as `gpt-4o[temperature=0.7]`, which is the same model at
    another setting; its longest table entry the name starts with, so dated snapshots match), else None."""
    if model.price_in is not None and model.price_out is not None:
        return Price(input=model.price_in, output=model.price_out, source="given")
    if embedded:
        return Price(input=0.0, output=0.0, source="local")
    name = (model.model or name or "").lower().rsplit("/", 1)[-1]
    matches = [key for key in PRICE_TABLE if name == key or name.startswith(key + "-")]
    if not matches:
        return None
    price_in, price_out = PRICE_TABLE[max(matches, key=len)]
    return Price(input=price_in, output=price_out, source="table")


def cost_of(usage: Usage, price: Price) -> float:
    """USD for `usage` at `price`."""
    return (usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1e6
