"""kbqa / general (FactPrompts, open QA): claims of the response vs. the reference document's top-k sentences,
else search results when a backend is configured, else the model's own knowledge (said in the report's note)."""

from __future__ import annotations

from debate.plugins import TASKS
from debate.tasks._base import BaseTask


class OpenTask(BaseTask):
    """claims vs. the reference, else search, else knowledge-free."""

    def __init__(self, name: str = "general") -> None:
        self.name = name


TASKS.register("kbqa", lambda: OpenTask("kbqa"))
TASKS.register("general", lambda: OpenTask("general"))
