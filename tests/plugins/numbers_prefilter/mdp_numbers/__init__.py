"""A plugin prefilter: a claim with a number that appears in none of its evidence is decided non-factual."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from debate.plugins import Plan, StageContext
from debate.types import Claim, ClaimVerdict, Evidence, PrefilterDecision, ResponseCheck


class NumbersPrefilter:
    """numbers in the claim must appear in its evidence"""

    name = "numbers"

    class Options(BaseModel):
        """The plugin's own knobs: `--prefilter-option numbers.min_digits=4` on the command line."""

        model_config = ConfigDict(extra="forbid")
        min_digits: int = Field(default=1, ge=1)
        """Numbers with fewer digits are not checked."""

    def __init__(self, ctx: StageContext) -> None:
        self._ctx = ctx
        self._options = ctx.config.prefilter.options_for(self.name, self.Options)

    def prompt_hashes(self) -> dict[str, str]:
        return {}

    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        numbers = [n for n in re.findall(r"\d+", claim.text) if len(n) >= self._options.min_digits]
        seen = " ".join(e.text for e in evidence)
        missing = [n for n in numbers if n not in seen]
        if missing:
            reason = f"number(s) {', '.join(missing)} appear in no evidence"
            return PrefilterDecision(name=self.name, decision="non_factual", reason=reason, error_severity=3)
        return PrefilterDecision(name=self.name, decision="pass", reason="every number is in the evidence")

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        return None

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        return None

    def note(self) -> str | None:
        return None
