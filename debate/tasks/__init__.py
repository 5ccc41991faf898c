"""The built-in tasks, one file each; importing this package registers them in `debate.stages.TASKS`.

A new task is one more file here (registered with `TASKS.register`), or an installed package that declares an
entry point in the group `markov_debate.tasks`.
"""

from debate.tasks import dialogue, general, qa, rag, summarization

__all__ = ["dialogue", "general", "qa", "rag", "summarization"]
