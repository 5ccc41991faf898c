"""A plugin prefilter: a claim with a number that appears in none of its evidence is decided non-factual."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from debate.plugins import Plan
from debate.prefilter import BasePrefilter
from debate.types import Claim, Evidence, PrefilterDecision


class NumbersOptions(BaseModel):
    """The plugin's own knobs: `--prefilter.options numbers.min_digits=4` on the command line."""

    model_config = ConfigDict(extra="forbid")
    min_digits: int = Field(default=1, ge=1)
    """Numbers with fewer digits are not checked."""


class NumbersPrefilter(BasePrefilter[NumbersOptions]):
    """numbers in the claim must appear in its evidence"""

    name = "numbers"

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        numbers = [n for n in re.findall(r"\d+", claim.text) if len(n) >= self.options.min_digits]
        seen = " ".join(e.text for e in evidence)
        missing = [n for n in numbers if n not in seen]
        if missing:
            reason = f"number(s) {', '.join(missing)} appear in no evidence"
            return PrefilterDecision(name=self.name, decision="non_factual", reason=reason, error_severity=3)
        return PrefilterDecision(name=self.name, decision="pass", reason="every number is in the evidence")
