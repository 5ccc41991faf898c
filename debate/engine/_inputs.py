"""What an agent is shown (paper Table 12): the evidence, numbered, and earlier opinions in the reply format."""

from __future__ import annotations

import json
from collections.abc import Sequence

from debate.engine._driver import PriorOpinion
from debate.types import Evidence, Opinion

__all__ = ["render_evidence", "render_opinion", "render_opinions"]


def render_evidence(evidence: Sequence[Evidence]) -> str:
    """Numbered evidence items; an explicit note when there is none, so the model knows it is on its own."""
    if not evidence:
        return "(no evidence was given: judge from well-established knowledge and say so)"
    return "\n".join(f"[{i}] {item.text}" for i, item in enumerate(evidence, start=1))


def render_opinion(opinion: Opinion) -> str:
    """An opinion in the paper's reply format, as the next agent sees it."""
    reply: dict[str, object] = {
        "opinion": opinion.opinion,
        "factuality": opinion.factuality,
        "Error severity": opinion.error_severity,
    }
    if not opinion.enough_evidence:
        reply["enough evidence"] = False
    return json.dumps(reply, ensure_ascii=False)


def render_opinions(previous: Sequence[PriorOpinion]) -> str:
    """Earlier opinions as paper Table 12 shows them: "Here is the <role> agent's response:" and the reply."""
    return "\n\n".join(f"Here is the {p.title} agent's response:\n{render_opinion(p.opinion)}" for p in previous)
