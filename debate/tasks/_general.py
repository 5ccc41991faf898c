"""kbqa / general (FactPrompts, open QA): claims of the response vs. the reference document's top-k sentences,
else search results when a backend is configured, else the model's own knowledge (said in the report's note)."""

from __future__ import annotations

from debate.tasks._base import BaseTask


class OpenTask(BaseTask):
    """claims vs. the reference, else search, else knowledge-free."""

    def __init__(self, name: str = "general") -> None:
        self.name = name


def kbqa() -> OpenTask:
    """knowledge-based QA (FactPrompts): claims vs. reference or search"""
    return OpenTask("kbqa")


def general() -> OpenTask:
    """open responses: claims vs. reference or search"""
    return OpenTask("general")
