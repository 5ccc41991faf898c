"""Where a claim waits for a human, and the seeded spot-check sample as a range of fixed draws (so the queue is
an indexed read whose cost does not grow with the store)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

__all__ = ["QueueName", "claim_context", "claim_draw", "queue_of", "sample_window"]

QueueName = Literal["needs-review", "spot-check"]


def _unit(text: str) -> float:
    """A uniform number in [0, 1) fixed by `text` (52 bits, exact as a float)."""
    return (int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 12) / float(1 << 52)


def claim_draw(audit_id: int, claim_id: str) -> float:
    """The claim's draw, stored with it once: the same whatever the seed, so a sample is a range query."""
    return _unit(f"claim:{audit_id}:{claim_id}")


def queue_of(engine_label: str) -> QueueName:
    """An unreviewed claim the engine did not find factual needs a human; a factual one may be spot-checked."""
    return "spot-check" if engine_label == "factual" else "needs-review"


def sample_window(seed: int, rate: float) -> list[tuple[float, float]]:
    """The draws [lo, hi) a seed's sample takes: an arc of length `rate` starting at a point the seed fixes (on the
    circle [0, 1), so it may wrap into two ranges). Each claim is in it with probability `rate`, independently of
    the others, and its membership never changes as audits arrive."""
    if rate <= 0:
        return []
    if rate >= 1:
        return [(0.0, 1.0)]
    start = _unit(f"seed:{seed}")
    end = start + rate
    if end <= 1:
        return [(start, end)]
    return [(start, 1.0), (0.0, end - 1)]


def claim_context(claim: dict[str, Any]) -> str:
    """What a reviewer reads next to a claim (its evidence and the deciding opinion: the last agent's, or the
    prefilter's reason), as JSON, from the claim as the stored report has it."""
    final = (claim.get("debate") or {}).get("final") or {}
    opinion = final.get("opinion") or claim.get("reason")
    return json.dumps({"evidence": claim.get("evidence") or [], "final_opinion": opinion}, ensure_ascii=False)
